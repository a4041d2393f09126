"""Chain semantics: does the evidence chain *entail* the question's relation?

The rule-based validator (``construct.validate``) checks that the chain is
*necessary* (the answer is hidden off-chain) and *followable*. It cannot tell
whether the chain *means* anything: after the direct link is removed, the
shortest remaining path may be "studied at -> staff member -> corresponded
with -> educated at", from which no reader can infer where the subject worked.
WebDetective's chains entail their answer ("Kane Cornes -> brother Chad ->
stepmother Nicole -> her husband Graham" answers "Who is Kane's father?").

:class:`RelationChainValidator` reads the *typed edges* of the graph
(``(subject, relation, object)``, e.g. ``DemoWorld.relations``) and accepts a
path ``v0 -> ... -> vn`` only if some choice of one typed relation per hop
composes, left to right under the rule table, to the question's relation
(``QATriple.relation``). Left-to-right folding is the documented convention:
``((r1 . r2) . r3) . r4``.

Rule table :data:`DEFAULT_RULES` (``r1 . r2 => r`` reads "if y is x's r1 and z
is y's r2 then z is x's r"):

* **containment** (``located_in`` is transitive containment; the answer
  page fixes the level, so "city in region in country" answers "which
  country"): ``located_in . located_in => located_in``;
  ``headquartered_in . located_in => based_in_country``;
  ``born_in . located_in => born_in_country``;
  ``died_in . located_in => died_in_country``;
  ``set_in . located_in => set_in_country``; each ``*_country`` relation
  stays itself when followed by ``located_in``.
* **witnesses** (a page inside x that states its country names x's country,
  because a place lies in exactly one country):
  ``inverse:headquartered_in . based_in_country => located_in``;
  ``inverse:born_in . born_in_country => located_in``;
  ``inverse:set_in . set_in_country => located_in``.
* **family**: ``sibling . sibling => sibling`` (full siblings; a path never
  repeats a page, so the result is not x itself);
  ``sibling . father => father``; ``sibling . mother => mother``;
  ``sibling . stepmother => stepmother``; ``stepmother . spouse => father``
  (a stepmother is by definition the father's wife);
  ``father . father => paternal_grandfather`` (and the maternal and
  grandmother forms); ``spouse . father => father_in_law``,
  ``spouse . mother => mother_in_law``.
* **creative works and organisations**: ``written_by . born_in =>
  author_born_in`` (likewise ``directed_by``, ``composed_by``, ``painted_by``,
  ``founded_by``), which stays itself when followed by ``located_in``
  ("In which country was the author of X born?"); ``father . born_in =>
  father_born_in`` (``father . died_in``, ``mother . born_in``,
  ``spouse . born_in`` likewise), also kept through ``located_in``.

Deliberately **absent**: ``mother . spouse`` and ``father . spouse`` (a
parent's spouse may be a step-parent), ``sibling . spouse`` (a sibling's
spouse is an in-law, not a parent), ``father . inverse:father`` (a father's
child may be a half-sibling), ``inverse:located_in . located_in`` (a
neighbour's container), and everything involving ``employer``,
``educated_at``, ``corresponded_with`` and other non-functional relations.

Rejection reasons (counted by the construction summary):

* ``relation_not_composable`` -- no rule produces the question's relation, so
  no multi-hop chain can entail it (``employer``, ``educated_at``, ...).
* ``untyped_hop`` -- a hop's link has no typed edge.
* ``relations_do_not_compose`` -- at some hop no rule combines the relations
  so far with the hop's relation.
* ``chain_entails_other_relation`` -- the chain composes, but to another
  relation than the question's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from aethersearch.construct.validate import ACCEPT, Candidate, Verdict

if TYPE_CHECKING:
    from aethersearch.corpus.demo_world import DemoWorld

__all__ = ["DEFAULT_RULES", "Edge", "RelationChainValidator", "compose", "demo_chain_validator"]

Edge = tuple[str, str, str]

DEFAULT_RULES: dict[tuple[str, str], str] = {
    # containment
    ("located_in", "located_in"): "located_in",
    ("headquartered_in", "located_in"): "based_in_country",
    ("based_in_country", "located_in"): "based_in_country",
    ("born_in", "located_in"): "born_in_country",
    ("born_in_country", "located_in"): "born_in_country",
    ("died_in", "located_in"): "died_in_country",
    ("died_in_country", "located_in"): "died_in_country",
    ("set_in", "located_in"): "set_in_country",
    ("set_in_country", "located_in"): "set_in_country",
    # witnesses
    ("inverse:headquartered_in", "based_in_country"): "located_in",
    ("inverse:born_in", "born_in_country"): "located_in",
    ("inverse:set_in", "set_in_country"): "located_in",
    # family
    ("sibling", "sibling"): "sibling",
    ("sibling", "father"): "father",
    ("sibling", "mother"): "mother",
    ("sibling", "stepmother"): "stepmother",
    ("stepmother", "spouse"): "father",
    ("father", "father"): "paternal_grandfather",
    ("mother", "father"): "maternal_grandfather",
    ("father", "mother"): "paternal_grandmother",
    ("mother", "mother"): "maternal_grandmother",
    ("spouse", "father"): "father_in_law",
    ("spouse", "mother"): "mother_in_law",
    # creative works and organisations: where their maker was born (then the country that place lies in)
    ("written_by", "born_in"): "author_born_in",
    ("author_born_in", "located_in"): "author_born_in",
    ("directed_by", "born_in"): "director_born_in",
    ("director_born_in", "located_in"): "director_born_in",
    ("composed_by", "born_in"): "composer_born_in",
    ("composer_born_in", "located_in"): "composer_born_in",
    ("painted_by", "born_in"): "painter_born_in",
    ("painter_born_in", "located_in"): "painter_born_in",
    ("founded_by", "born_in"): "founder_born_in",
    ("founder_born_in", "located_in"): "founder_born_in",
    # family and place: where a parent or spouse was born or died
    ("father", "born_in"): "father_born_in",
    ("father_born_in", "located_in"): "father_born_in",
    ("father", "died_in"): "father_died_in",
    ("father_died_in", "located_in"): "father_died_in",
    ("mother", "born_in"): "mother_born_in",
    ("mother_born_in", "located_in"): "mother_born_in",
    ("spouse", "born_in"): "spouse_born_in",
    ("spouse_born_in", "located_in"): "spouse_born_in",
}


def compose(relations: Sequence[Iterable[str]], rules: Mapping[tuple[str, str], str] = DEFAULT_RULES
            ) -> tuple[frozenset[str], int | None]:
    """Relations the hop sequence can compose to (left fold), and the first hop where nothing composes.

    ``relations[i]`` are the typed relations of hop ``i``. Returns
    ``(results, None)`` when at least one composition survives every hop,
    else ``(frozenset(), i)`` with ``i`` the 0-based hop at which all died.
    """
    if not relations:
        return frozenset(), 0
    current = frozenset(relations[0])
    if not current:
        return frozenset(), 0
    for hop, step in enumerate(relations[1:], start=1):
        current = frozenset(rules[(a, b)] for a in current for b in step if (a, b) in rules)
        if not current:
            return frozenset(), hop
    return current, None


class RelationChainValidator:
    """Accepts a candidate only if its path's typed relations compose to the question's relation.

    ``edges`` are ``(subject, relation, object)`` triples; a link may carry
    several relations (a person's employer that is also their university),
    and any one choice per hop may compose. ``rules`` defaults to
    :data:`DEFAULT_RULES` (see the module docstring for the table and the
    rejection reasons).
    """

    name = "relation-chain"

    def __init__(self, edges: Iterable[Edge], *, rules: Mapping[tuple[str, str], str] | None = None) -> None:
        self.rules: dict[tuple[str, str], str] = dict(DEFAULT_RULES if rules is None else rules)
        self.edges: dict[tuple[str, str], list[str]] = defaultdict(list)
        for subject, relation, obj in edges:
            if relation not in self.edges[(subject, obj)]:
                self.edges[(subject, obj)].append(relation)
        self.composable = frozenset(self.rules.values())

    def hop_relations(self, path: Sequence[str]) -> list[list[str]]:
        """The typed relations of each hop ``path[i] -> path[i+1]`` (empty list: untyped)."""
        return [list(self.edges.get((a, b), ())) for a, b in pairwise(path)]

    def validate(self, candidate: Candidate) -> Verdict:
        """Accept when some per-hop choice of relations composes to ``candidate.triple.relation``."""
        target, path = candidate.triple.relation, candidate.path
        hops = self.hop_relations(path)
        if len(hops) == 1:  # a single hop entails only itself
            return ACCEPT if target in hops[0] else Verdict(
                False, "chain_entails_other_relation", f"hop {path[0]}->{path[1]} is {hops[0]}, not {target}")
        if target not in self.composable:
            return Verdict(False, "relation_not_composable",
                           f"no composition rule yields {target!r}; no multi-hop chain can entail it")
        for index, relations in enumerate(hops):
            if not relations:
                return Verdict(False, "untyped_hop", f"hop {path[index]!r}->{path[index + 1]!r} has no typed edge")
        results, failed = compose(hops, self.rules)
        if failed is not None:
            return Verdict(False, "relations_do_not_compose",
                           f"relations {hops[: failed + 1]} stop composing at hop "
                           f"{path[failed]!r}->{path[failed + 1]!r}")
        if target not in results:
            return Verdict(False, "chain_entails_other_relation",
                           f"chain {hops} composes to {sorted(results)}, not {target!r}")
        return ACCEPT


def demo_chain_validator(world: DemoWorld) -> RelationChainValidator:
    """The relation-chain validator over the demo world's typed edges (``world.relations``)."""
    return RelationChainValidator(world.relations)
