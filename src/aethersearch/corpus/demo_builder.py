"""The demo world's builder: syllable names, entities, their pages and the facts drawn from one RNG.

Why a module of its own: the base world (``WorldBuilder.build``) and the
structures added after it (``corpus.demo_structures``) both draw entities and
render facts through these pieces, and ``corpus.demo_world`` runs the two steps
in order; so the pieces sit below both, and neither step imports the other.
What the world holds, and why it is fictional and deterministic, is told in
``corpus.demo_world``.
"""

from __future__ import annotations

import random
import re
import unicodedata
from typing import Any, Literal, NamedTuple

from aethersearch.records import Document, Record

__all__ = ["BasePlaces", "CITY_SUFFIXES", "DemoFact", "DemoMultiHop", "Entity", "Names", "OCCUPATIONS",
    "WorldBuilder", "join_names", "slugify"]

# ----------------------------------------------------------------------------- records


class DemoFact(Record):
    """A single-hop question about one page; the answer text appears on ``subject_id``'s page."""

    id: str
    question: str
    answers: list[str]
    subject_id: str
    answer_id: str | None
    relation: str


class DemoMultiHop(Record):
    """A two-hop question composed from two facts (or a comparison of two pages)."""

    id: str
    question: str
    answers: list[str]
    supporting_pages: list[str]
    decomposition: list[dict[str, Any]]
    kind: Literal["compositional", "comparison"]


# ----------------------------------------------------------------------------- names

_SYLLABLES = (
    "ka vel mor tin sa ren dor li ath quo bra zen fi lo mar ces ul tav ri on "
    "gal pe thu vor ny ell ko ris dan emi bal zor ha isk ot rue vin sel ama "
    "dre ost pra lum cor ith ne sha var bo"
).split()
_COUNTRY_SUFFIX = ("ia", "and", "ora", "istan", "esh", "avia")
CITY_SUFFIXES = ("", "", "", "holm", "port", "ford", "mere", "ovo", "ton")
_ORG_KINDS = (
    ("university", "University"), ("university", "Institute"), ("company", "Company"),
    ("company", "Works"), ("theatre", "Theatre Company"), ("observatory", "Observatory"),
    ("guild", "Guild"), ("orchestra", "Orchestra"),
)
_ORG_DESCRIPTIONS = {
    "university": "a university", "company": "a trading company", "theatre": "a theatre company",
    "observatory": "an astronomical observatory", "guild": "a craft guild", "orchestra": "an orchestra",
}
_WORK_KINDS = ("film", "novel")
_ADJECTIVES = (
    "Silent Hollow Crimson Distant Gilded Broken Hidden Endless Pale Restless Quiet "
    "Burning Silver Northern Wandering Last Frozen Amber Bitter Golden"
).split()
_NOUNS = (
    "Harbour Lantern Orchard River Tower Garden Mirror Season Voyage Archive Meadow "
    "Bridge Crown Winter Ember Compass Tide Forest Letter Citadel"
).split()
OCCUPATIONS = (
    "painter", "composer", "architect", "astronomer", "novelist", "film director",
    "engineer", "botanist", "historian", "sculptor", "chemist", "poet",
)
_TOPICS = (
    "tidal clocks", "glass harmonics", "river cartography", "lichen dyes", "orbital tables",
    "folk ballads", "stone bridges", "winter gardens", "signal lamps", "paper engines",
    "salt roads", "bell foundries", "mountain observatories", "silk looms",
)


def slugify(title: str) -> str:
    """Stable page id of a title: ASCII-folded, lower case, runs of non-alphanumerics -> ``_``."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "_", ascii_title.lower()).strip("_")


class Names:
    """Unique fictional names and titles drawn from syllables."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used_titles: set[str] = set()
        self.used_words: set[str] = set()

    def word(self, low: int, high: int, suffix: str = "") -> str:
        """A fresh capitalised syllable word not used before in this world."""
        while True:
            count = self.rng.randint(low, high)
            word = "".join(self.rng.choice(_SYLLABLES) for _ in range(count)) + suffix
            word = word.capitalize()
            if word not in self.used_words and 4 <= len(word) <= 14:
                self.used_words.add(word)
                return word

    def title(self, make: Any) -> str:
        """A title (from ``make()``) whose slug is unique in the world."""
        while True:
            title = str(make())
            if slugify(title) not in self.used_titles:
                self.used_titles.add(slugify(title))
                return title


# ----------------------------------------------------------------------------- entities


class Entity:
    """A page under construction: its kind, title, sentences and mentioned pages."""

    def __init__(self, kind: str, title: str, **attrs: Any) -> None:
        self.kind = kind
        self.title = title
        self.id = slugify(title)
        self.attrs: dict[str, Any] = dict(attrs)
        self.sentences: list[str] = []
        self.links: list[str] = []
        self.typed: list[tuple[str, str]] = []

    def say(self, sentence: str, *mentions: Entity, relation: str | None = None) -> None:
        """Add a sentence; every mentioned entity becomes a link (first mention order).

        ``relation`` types the sentence's edges (``self --relation--> mention``);
        it is required whenever the sentence mentions another page, so every
        link of the world carries at least one typed relation.
        """
        if mentions and relation is None:
            raise ValueError(f"sentence on {self.id!r} mentions pages but has no relation: {sentence!r}")
        self.sentences.append(sentence)
        for other in mentions:
            if other.id != self.id and other.id not in self.links:
                self.links.append(other.id)
            if other.id != self.id and relation is not None and (relation, other.id) not in self.typed:
                self.typed.append((relation, other.id))

    def document(self) -> Document:
        return Document(id=self.id, title=self.title, text=" ".join(self.sentences), links=self.links)


class BasePlaces(NamedTuple):
    """The base world's places, which the structures step (``corpus.demo_structures``) extends."""

    countries: list[Entity]
    cities: list[Entity]
    orgs: list[Entity]


def _person_answers(person: Entity) -> list[str]:
    return [person.title, person.attrs["surname"]]


# Templates: (sentence on the subject page, question templates). Placeholders: {s} subject, {o} object.
_SENTENCES: dict[str, tuple[str, ...]] = {
    "born_in": ("{s} was born in {o}.", "{s} was a native of {o}.", "Born in {o}, {sur} grew up there.",
                "{sur}'s birthplace was {o}."),
    "birth_year": ("{s} was born in {o}.", "{sur} was born in the year {o}.", "Records give {o} as the year of {sur}'s birth."),
    "employer": ("{s} worked for {o}.", "{sur} spent most of a career at {o}.", "{sur} was employed by {o}."),
    "educated_at": ("{s} studied at {o}.", "{sur} was educated at {o}.", "{sur} graduated from {o}."),
    "occupation": ("{s} was a {o}.", "{sur} worked as a {o}.", "By profession, {sur} was a {o}."),
    "founded_by": ("{s} was founded by {o}.", "{o} established {s}.", "The founder of {s} was {o}."),
    "founded_year": ("{s} was founded in {o}.", "{s} was established in {o}.", "Its founding year was {o}."),
    "headquartered_in": ("{s} is based in {o}.", "{s} has its headquarters in {o}.", "The seat of {s} is in {o}."),
    "located_in": ("{s} is a city in {o}.", "{s} lies in {o}.", "{s} is located in {o}."),
    "capital": ("The capital of {s} is {o}.", "{o} is the capital city of {s}.", "{s} is governed from its capital, {o}."),
    "directed_by": ("{s} is a film directed by {o}.", "{s} was directed by {o}.", "{o} directed the film {s}."),
    "written_by": ("{s} is a novel written by {o}.", "{s} was written by {o}.", "{o} is the author of {s}."),
    "release_year": ("{s} was released in {o}.", "{s} premiered in {o}.", "{s} first appeared in {o}."),
    "set_in": ("The story of {s} is set in {o}.", "{s} takes place in {o}.", "{s} is set in the city of {o}."),
    # added with the entailing structures (corpus/demo_structures.py)
    "landmark_country": ("{s} is located in {o}.", "{s} lies in {o}.", "{s} stands in {o}."),
    "based_in_country": ("{s} is registered in {o}.", "{s} is an organisation based in {o}."),
    "father": ("The father of {s} was {o}.", "{s}'s father was {o}.", "{o} was the father of {s}."),
    "mother": ("The mother of {s} was {o}.", "{s}'s mother was {o}.", "{o} was the mother of {s}."),
}
_QUESTIONS: dict[str, tuple[str, ...]] = {
    "born_in": ("Where was {s} born?", "In which city was {s} born?", "What is the birthplace of {s}?"),
    "birth_year": ("In what year was {s} born?", "When was {s} born?", "What year was {s} born in?"),
    "employer": ("Which organisation did {s} work for?", "Who employed {s}?", "Where did {s} work?"),
    "educated_at": ("Where did {s} study?", "Which institution educated {s}?", "Where was {s} educated?"),
    "occupation": ("What was the profession of {s}?", "What did {s} do for a living?", "What was {s}'s occupation?"),
    "founded_by": ("Who founded {s}?", "Who established {s}?", "Who was the founder of {s}?"),
    "founded_year": ("When was {s} founded?", "In what year was {s} established?", "What year was {s} founded?"),
    "headquartered_in": ("Where is {s} based?", "In which city is {s} headquartered?", "Where are the headquarters of {s}?"),
    "located_in": ("In which country is {s}?", "Which country is {s} located in?", "{s} is a city in which country?"),
    "capital": ("What is the capital of {s}?", "Which city is the capital of {s}?", "Name the capital of {s}."),
    "directed_by": ("Who directed {s}?", "Who was the director of the film {s}?", "{s} was directed by whom?"),
    "written_by": ("Who wrote {s}?", "Who is the author of the novel {s}?", "{s} was written by whom?"),
    "release_year": ("When was {s} released?", "In what year did {s} come out?", "What year was {s} first released?"),
    "set_in": ("Where is {s} set?", "In which city does {s} take place?", "What city is {s} set in?"),
    "landmark_country": ("In which country is {s}?", "Which country is {s} located in?",
                         "In which country does {s} stand?"),
    "based_in_country": ("In which country is {s} based?", "Which country is {s} based in?"),
    "father": ("Who is the father of {s}?", "Who was {s}'s father?", "Who was the father of {s}?"),
    "mother": ("Who is the mother of {s}?", "Who was {s}'s mother?", "Who was the mother of {s}?"),
}


class WorldBuilder:
    """Draws the world's entities and facts in a fixed order from one RNG."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.names = Names(self.rng)
        self.facts: list[DemoFact] = []
        self.multihop: list[DemoMultiHop] = []
        self.pages: list[Entity] = []
        self.fact_index: dict[tuple[str, str], DemoFact] = {}

    # -- facts
    def fact(self, relation: str, subject: Entity, obj: Entity | str, answers: list[str] | None = None, *,
             rng: random.Random | None = None, templates: str | None = None) -> None:
        """Render ``relation(subject, obj)`` on the subject page and record its question.

        ``rng`` (default: the world's main stream) draws the templates;
        ``templates`` names the ``_SENTENCES``/``_QUESTIONS`` entry when it
        differs from the relation (a landmark's ``located_in`` is not "a city in").
        """
        rng = rng or self.rng
        key = templates or relation
        obj_text = obj.title if isinstance(obj, Entity) else obj
        sur = subject.attrs.get("surname", subject.title)
        sentence = rng.choice(_SENTENCES[key]).format(s=subject.title, o=obj_text, sur=sur)
        mentions = [obj] if isinstance(obj, Entity) else []
        subject.say(sentence[0].upper() + sentence[1:], *mentions, relation=relation)
        question = rng.choice(_QUESTIONS[key]).format(s=subject.title)
        if answers is None:
            answers = _person_answers(obj) if isinstance(obj, Entity) and obj.kind == "person" else [obj_text]
        record = DemoFact(
            id=f"demo_fact_{len(self.facts) + 1:05d}", question=question, answers=answers,
            subject_id=subject.id, answer_id=obj.id if isinstance(obj, Entity) else None, relation=relation,
        )
        self.facts.append(record)
        self.fact_index[(subject.id, relation)] = record

    # -- entities
    def build(self, n_people: int, n_countries: int, n_cities: int, n_orgs: int, n_works: int) -> BasePlaces:
        """Draw the base world; returns the places the structures step (``demo_structures``) extends."""
        rng, names = self.rng, self.names
        countries = [Entity("country", names.title(lambda: names.word(2, 2, rng.choice(_COUNTRY_SUFFIX))))
                     for _ in range(n_countries)]
        cities = [Entity("city", names.title(lambda: names.word(2, 3, rng.choice(CITY_SUFFIXES))))
                  for _ in range(n_cities)]
        orgs: list[Entity] = []
        for _ in range(n_orgs):
            kind, label = rng.choice(_ORG_KINDS)
            orgs.append(Entity("organisation", names.title(lambda label=label: f"{names.word(2, 3)} {label}"),
                                org_kind=kind))
        people: list[Entity] = []
        for _ in range(n_people):
            given, surname = names.word(2, 2), names.word(2, 3)
            people.append(Entity("person", names.title(lambda g=given, s=surname: f"{g} {s}"),
                                  surname=surname, year=rng.randint(1801, 1960)))
        works: list[Entity] = []
        for _ in range(n_works):
            kind = rng.choice(_WORK_KINDS)
            works.append(Entity("work", names.title(self._work_title), work_kind=kind))
        self.pages = [*countries, *cities, *orgs, *people, *works]

        # places
        for index, city in enumerate(cities):
            country = countries[index % n_countries] if index < n_countries else rng.choice(countries)
            city.attrs["country"] = country
            city.attrs["population"] = rng.randint(8, 900) * 1000
        for country in countries:
            own = [c for c in cities if c.attrs["country"] is country]
            country.attrs["capital"] = own[0]
            country.say(f"{country.title} is a country with {len(own)} major cities.")
            self.fact("capital", country, own[0])
            if len(own) > 1:
                listed = own[1:6]
                country.say(f"Other cities of {country.title} include " + join_names([c.title for c in listed]) + ".",
                            *listed, relation="inverse:located_in")
        for city in cities:
            city.say(f"{city.title} has a population of about {city.attrs['population']:,}.")
            self.fact("located_in", city, city.attrs["country"])

        # organisations
        universities = [o for o in orgs if o.attrs["org_kind"] == "university"] or orgs[:1]
        for org in orgs:
            org.attrs["city"] = rng.choice(cities)
            org.say(f"{org.title} is {_ORG_DESCRIPTIONS[org.attrs['org_kind']]}.")
            self.fact("headquartered_in", org, org.attrs["city"])

        # people
        for person in people:
            person.attrs["born_in"] = rng.choice(cities)
            person.attrs["employer"] = rng.choice(orgs)
            person.attrs["educated_at"] = rng.choice(universities)
            person.attrs["occupation"] = rng.choice(OCCUPATIONS)
            person.say(f"{person.title} ({person.attrs['year']}) was known for work on {rng.choice(_TOPICS)}.")
            self.fact("born_in", person, person.attrs["born_in"])
            self.fact("birth_year", person, str(person.attrs["year"]))
            self.fact("occupation", person, person.attrs["occupation"])
            self.fact("educated_at", person, person.attrs["educated_at"])
            self.fact("employer", person, person.attrs["employer"])
            for colleague in rng.sample(people, k=min(2, len(people))):
                if colleague is not person:
                    person.say(f"{person.attrs['surname']} corresponded with {colleague.title}.", colleague,
                               relation="corresponded_with")

        for org in orgs:
            founder = rng.choice(people)
            org.attrs["founder"] = founder
            self.fact("founded_by", org, founder)
            year = max(founder.attrs["year"] + rng.randint(20, 45), 1825)
            org.attrs["year"] = year
            self.fact("founded_year", org, str(year))
            staff = [p for p in people if p.attrs["employer"] is org][:4]
            if staff:
                org.say("Staff have included " + join_names([p.title for p in staff]) + ".", *staff,
                        relation="inverse:employer")

        # works
        directors = [p for p in people if p.attrs["occupation"] == "film director"] or people
        writers = [p for p in people if p.attrs["occupation"] in ("novelist", "poet")] or people
        for work in works:
            film = work.attrs["work_kind"] == "film"
            creator = rng.choice(directors if film else writers)
            work.attrs["creator"] = creator
            work.attrs["year"] = creator.attrs["year"] + rng.randint(22, 60)
            work.attrs["set_in"] = rng.choice(cities)
            self.fact("directed_by" if film else "written_by", work, creator)
            self.fact("release_year", work, str(work.attrs["year"]))
            self.fact("set_in", work, work.attrs["set_in"])
            creator.say(f"{creator.attrs['surname']} {'directed' if film else 'wrote'} {work.title}.", work,
                        relation="inverse:directed_by" if film else "inverse:written_by")

        # inverse mentions on place pages
        for city in cities:
            natives = [p for p in people if p.attrs["born_in"] is city][:5]
            if natives:
                city.say(f"Notable people born in {city.title} include " + join_names([p.title for p in natives]) + ".",
                         *natives, relation="inverse:born_in")
            based = [o for o in orgs if o.attrs["city"] is city][:3]
            if based:
                city.say(f"{city.title} is home to " + join_names([o.title for o in based]) + ".", *based,
                         relation="inverse:headquartered_in")
        self._compose(people, orgs, works, cities)
        return BasePlaces(countries, cities, orgs)

    def _work_title(self) -> str:
        rng = self.rng
        form = rng.randrange(3)
        if form == 0:
            return f"The {rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)} of {self.names.word(2, 2)}"
        if form == 1:
            return f"{self.names.word(2, 3)}'s {rng.choice(_NOUNS)}"
        return f"{rng.choice(_ADJECTIVES)} {self.names.word(2, 3)}"

    # -- multi-hop
    def _hop(self, subject: Entity, relation: str) -> dict[str, Any]:
        fact = self.fact_index[(subject.id, relation)]
        return {"question": fact.question, "answer": fact.answers[0], "page": fact.subject_id,
                "relation": relation, "answer_id": fact.answer_id}

    def _add_multihop(self, question: str, answers: list[str], pages: list[str],
                      decomposition: list[dict[str, Any]], kind: Literal["compositional", "comparison"]) -> None:
        self.multihop.append(DemoMultiHop(
            id=f"demo_mh_{len(self.multihop) + 1:05d}", question=question, answers=answers,
            supporting_pages=pages, decomposition=decomposition, kind=kind,
        ))

    def _compose(self, people: list[Entity], orgs: list[Entity], works: list[Entity], cities: list[Entity]) -> None:
        rng = self.rng
        for work in works:
            creator = work.attrs["creator"]
            rel = "directed_by" if work.attrs["work_kind"] == "film" else "written_by"
            role = "director" if rel == "directed_by" else "author"
            template = rng.choice(("Where was the {r} of {w} born?", "In which city was the {r} of {w} born?"))
            self._add_multihop(template.format(r=role, w=work.title), [creator.attrs["born_in"].title],
                               [work.id, creator.id], [self._hop(work, rel), self._hop(creator, "born_in")],
                               "compositional")
        for org in orgs:
            founder = org.attrs["founder"]
            self._add_multihop(f"In what year was the founder of {org.title} born?", [str(founder.attrs["year"])],
                               [org.id, founder.id], [self._hop(org, "founded_by"), self._hop(founder, "birth_year")],
                               "compositional")
            self._add_multihop(f"In which country is {org.title} headquartered?", [org.attrs["city"].attrs["country"].title],
                               [org.id, org.attrs["city"].id],
                               [self._hop(org, "headquartered_in"), self._hop(org.attrs["city"], "located_in")],
                               "compositional")
        for person in people[: max(1, len(people) // 2)]:
            employer = person.attrs["employer"]
            self._add_multihop(f"Who founded the organisation that {person.title} worked for?",
                               _person_answers(employer.attrs["founder"]), [person.id, employer.id],
                               [self._hop(person, "employer"), self._hop(employer, "founded_by")], "compositional")
            city = person.attrs["born_in"]
            self._add_multihop(f"In which country was {person.title} born?", [city.attrs["country"].title],
                               [person.id, city.id], [self._hop(person, "born_in"), self._hop(city, "located_in")],
                               "compositional")
        pairs = 0
        while pairs < max(1, len(people) // 4) and len(people) > 1:
            a, b = rng.sample(people, 2)
            if a.attrs["year"] == b.attrs["year"]:
                continue
            first = a if a.attrs["year"] < b.attrs["year"] else b
            self._add_multihop(f"Who was born first, {a.title} or {b.title}?", _person_answers(first), [a.id, b.id],
                               [self._hop(a, "birth_year"), self._hop(b, "birth_year")], "comparison")
            pairs += 1


def join_names(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: how a page lists the entities it mentions."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
