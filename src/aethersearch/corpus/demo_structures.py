"""Demo-world structures whose single-hop facts have *entailing* alternative chains.

The base demo world links pages by arbitrary relations (studied at, worked
for, corresponded with), so once hint-free construction removes a fact's
direct link, the shortest remaining path rarely *implies* the answer. These
structures are built so that it does, WebDetective-style ("Who is the father
of Kane Cornes?" -> brother -> stepmother -> her husband):

* **Geography** -- every country gets two regions; every existing city is
  placed in one ("X is part of the R region"); each region gets three towns,
  half of which contain a district; each town (or its district) has one
  landmark stating its town/district *and* its country. Chains:
  city -> region -> country (2 hops), landmark -> town -> region -> country
  (3), landmark -> district -> town -> region -> country (4), all
  ``located_in`` composed transitively.
* **Organisations** -- each organisation states its country ("O is registered
  in C"): O -> headquarters city -> country (2 hops,
  ``headquartered_in . located_in => based_in_country``).
* **Families** (a shared surname; new people linked only to each other):
  two-hop (child -> sibling -> father/mother), three-hop (child -> sibling ->
  stepmother -> her husband) and four-hop (child -> sibling -> sibling ->
  stepmother -> her husband) shapes.

Each structure is laid out so the entailing chain is the *only* shortest
alternative path (one landmark per town or district, no spouse link where it
would open a non-entailing shortcut, family pages not linked from elsewhere).

Determinism: everything here draws from its own ``random.Random`` stream
(seeded from the world seed) *after* the base world is complete, so the base
world's pages, facts and multi-hop questions are unchanged except for the
sentences appended to cities, countries and organisations, and new facts are
appended after the old ones.
"""

from __future__ import annotations

import random

from aethersearch.corpus.demo_builder import CITY_SUFFIXES, OCCUPATIONS, Entity, Names, WorldBuilder, join_names

__all__ = ["FAMILY_SHAPES", "REGIONS_PER_COUNTRY", "TOWNS_PER_REGION", "add_structures"]

_REGION_KINDS = ("Highlands", "Valley", "Coast", "Lowlands", "Plains", "Marches")
_LANDMARK_KINDS = ("Bridge", "Tower", "Abbey", "Lighthouse", "Gate", "Fountain", "Aqueduct", "Amphitheatre")
#: Phrasings of the structures' chain sentences ({s} the page, {o} the linked page), drawn per sentence:
#: encyclopedic prose varies, so a reader has to cope with more than one verb per relation.
_PHRASES: dict[str, tuple[str, ...]] = {
    "city_region": ("{s} is part of the {o} region.", "{s} lies in the {o} region.",
                    "{s} is located in the {o} region.", "{s} belongs to the {o} region."),
    "region_country": ("{s} is a region of {o}.", "{s} lies in {o}.", "{s} is located in {o}.",
                       "{s} forms part of {o}."),
    "town_region": ("{s} is a town in the {o} region.", "{s} lies in the {o} region.",
                    "{s} is part of the {o} region.", "The town of {s} belongs to the {o} region."),
    "district_town": ("{s} is a district of {o}.", "{s} is part of {o}.", "{s} lies in {o}.",
                      "{s} makes up the old quarter of {o}."),
    "landmark_place": ("{s} is a landmark in {o}.", "{s} stands in {o}.", "{s} is located in {o}.",
                       "Visitors find {s} in {o}."),
    "sibling": ("{s} grew up with a sibling, {o}.", "{s} was a sibling of {o}.", "{s}'s sibling was {o}.",
                "{s} and {o} were raised together."),
    "father": ("The father of {s} was {o}.", "{s}'s father was {o}.", "{o} was the father of {s}.",
               "{s} was a child of {o}."),
    "mother": ("The mother of {s} was {o}.", "{s}'s mother was {o}.", "{o} was the mother of {s}.",
               "{s} was a child of {o}."),
    "stepmother": ("The stepmother of {s} was {o}.", "{s}'s stepmother was {o}.",
                   "{s} was raised by a stepmother, {o}."),
    "spouse": ("{s} married {o}.", "{s} was married to {o}.", "{s} was the wife of {o}."),
}
REGIONS_PER_COUNTRY = 2
TOWNS_PER_REGION = 3
FAMILY_SHAPES = ("two", "three", "four") * 9


def add_structures(builder: WorldBuilder, countries: list[Entity], cities: list[Entity], orgs: list[Entity]) -> None:
    """Append the geography, organisation-country and family structures to ``builder`` (see module doc)."""
    rng = random.Random(f"aethersearch-demo-structures:{builder.seed}")
    names = Names(rng)
    names.used_titles = builder.names.used_titles  # shared: titles and words stay unique world-wide
    names.used_words = builder.names.used_words
    _geography(builder, rng, names, countries, cities)
    for org in orgs:
        builder.fact("based_in_country", org, org.attrs["city"].attrs["country"], rng=rng)
    for shape in FAMILY_SHAPES:
        _family(builder, rng, names, shape)


def _say(rng: random.Random, kind: str, page: Entity, obj: Entity, relation: str,
         obj_text: str | None = None) -> None:
    """State ``relation(page, obj)`` on ``page`` in one of the ``_PHRASES[kind]`` phrasings."""
    sentence = rng.choice(_PHRASES[kind]).format(s=page.title, o=obj.title if obj_text is None else obj_text)
    page.say(sentence[0].upper() + sentence[1:], obj, relation=relation)


def _new(builder: WorldBuilder, kind: str, title: str, **attrs: object) -> Entity:
    entity = Entity(kind, title, **attrs)
    builder.pages.append(entity)
    return entity


def _geography(builder: WorldBuilder, rng: random.Random, names: Names, countries: list[Entity],
               cities: list[Entity]) -> None:
    regions_of: dict[str, list[Entity]] = {}
    for country in countries:
        regions = [_new(builder, "region", names.title(lambda: f"{names.word(2, 2)} {rng.choice(_REGION_KINDS)}"),
                        country=country) for _ in range(REGIONS_PER_COUNTRY)]
        regions_of[country.id] = regions
        for region in regions:
            _say(rng, "region_country", region, country, "located_in")
        country.say(f"{country.title} is divided into the regions {join_names([r.title for r in regions])}.", *regions,
                    relation="inverse:located_in")
    members: dict[str, list[Entity]] = {}
    for city in cities:
        region = rng.choice(regions_of[city.attrs["country"].id])
        _say(rng, "city_region", city, region, "located_in")
        members.setdefault(region.id, []).append(city)
    for country in countries:
        for region in regions_of[country.id]:
            own = members.get(region.id, [])
            if own:
                region.say(f"Cities of {region.title} include {join_names([c.title for c in own])}.", *own,
                           relation="inverse:located_in")
            towns = [_new(builder, "town", names.title(lambda: names.word(2, 3, rng.choice(CITY_SUFFIXES))))
                     for _ in range(TOWNS_PER_REGION)]
            region.say(f"Towns of {region.title} include {join_names([t.title for t in towns])}.", *towns,
                       relation="inverse:located_in")
            for town in towns:
                _say(rng, "town_region", town, region, "located_in")
                _landmark(builder, rng, names, town, country)


def _landmark(builder: WorldBuilder, rng: random.Random, names: Names, town: Entity, country: Entity) -> None:
    """One landmark in ``town`` itself (3-hop chain) or in a district of it (4-hop chain)."""
    place, where = town, town.title
    if rng.random() < 0.5:
        district = _new(builder, "district", names.title(lambda: names.word(2, 3)))
        _say(rng, "district_town", district, town, "located_in")
        town.say(f"{town.title} includes the {district.title} district.", district, relation="inverse:located_in")
        place, where = district, f"the {district.title} district"
    kind = rng.choice(_LANDMARK_KINDS)
    landmark = _new(builder, "landmark", names.title(lambda: f"{names.word(2, 2)} {kind}"))
    landmark.say(f"{landmark.title} is a {kind.lower()} completed in {rng.randint(1450, 1950)}.")
    _say(rng, "landmark_place", landmark, place, "located_in", where)
    place.say(f"Sights of {place.title} include {landmark.title}.", landmark, relation="inverse:located_in")
    builder.fact("located_in", landmark, country, rng=rng, templates="landmark_country")


def _person(builder: WorldBuilder, rng: random.Random, names: Names, surname: str, year: int) -> Entity:
    given = names.word(2, 2)
    person = _new(builder, "person", names.title(lambda: f"{given} {surname}"), surname=surname, year=year)
    occupation = rng.choice(OCCUPATIONS)
    article = "an" if occupation[0] in "aeiou" else "a"
    person.say(f"{person.title} ({year}) was {article} {occupation} of the {surname} family.")
    return person


def _family(builder: WorldBuilder, rng: random.Random, names: Names, shape: str) -> None:
    """A family whose father (or mother) fact on the first child has a 2-, 3- or 4-hop entailing chain."""
    surname = names.word(2, 3)
    year = rng.randint(1801, 1900)
    father = _person(builder, rng, names, surname, year)
    other = _person(builder, rng, names, surname, year + rng.randint(-5, 8))
    n_children = 3 if shape == "four" else 2
    children = [_person(builder, rng, names, surname, year + rng.randint(20, 40)) for _ in range(n_children)]
    first, second = children[0], children[1]
    builder.fact("father", first, father, [father.title], rng=rng)
    _say(rng, "sibling", first, second, "sibling")
    if shape == "two":  # other = the mother; first -> second -> father/mother
        mother = other
        builder.fact("mother", first, mother, [mother.title], rng=rng)
        _say(rng, "sibling", second, first, "sibling")
        _say(rng, "father", second, father, "father")
        _say(rng, "mother", second, mother, "mother")
        mother.say(f"The children of {mother.title} were {join_names([c.title for c in children])}.", *children,
                   relation="inverse:mother")
    else:  # other = the stepmother, married to the father; first -> ... -> stepmother -> father
        stepmother = other
        last = children[-1]
        if shape == "three":
            _say(rng, "sibling", second, first, "sibling")
        else:
            third = children[2]
            second.say(f"The siblings of {second.title} were {first.title} and {third.title}.", first, third,
                       relation="sibling")
            _say(rng, "sibling", third, second, "sibling")
        _say(rng, "stepmother", last, stepmother, "stepmother")
        _say(rng, "spouse", stepmother, father, "spouse")
        stepmother.say(f"{stepmother.title} was the stepmother of {last.title}.", last, relation="inverse:stepmother")
        father.say(f"{father.title} married {stepmother.title}.", stepmother, relation="spouse")
    father.say(f"The children of {father.title} were {join_names([c.title for c in children])}.", *children,
               relation="inverse:father")
