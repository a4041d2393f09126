"""Issue 33: minimal-need fact seeds, the hint screen, chains that entail, hop sub-questions, hop mix, screen policy."""

from __future__ import annotations

import pytest

from aethersearch.commands.construct import parse_hop_mix
from aethersearch.construct.hint_screen import SPECIFICATION_THRESHOLD, specification
from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree
from aethersearch.construct.llm_entailment import LLMEntailmentJudge, parse_yes_no
from aethersearch.construct.page_release import apply_screen
from aethersearch.construct.triples import QATriple
from aethersearch.construct.typed_facts import TypedGraph, extract_facts, fact_seeds
from aethersearch.corpus.graph import LinkGraph
from aethersearch.errors import ConfigError
from aethersearch.records import Document
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer


def _triple(tid: str, question: str, subject: str, answer_page: str, answers: list[str],
            relation: str = "seed:x") -> QATriple:
    return QATriple(id=tid, question=question, answers=answers, subject=subject, answer_page=answer_page,
                    relation=relation, source_dataset="x", source_split="x", source_id=tid, source_row_number=1,
                    source_file="x")


# ----------------------------------------------------------------------------- the hint screen

@pytest.mark.parametrize(("question", "fingerprinted"), [
    # the fingerprinted seeds
    ("Faruk Halibegovic was born in what city that is the capital and largest city of Bosnia and Herzegovina "
     "with a population of 275,524?", True),
    ("Which student of Socrates, and teacher of Aristole, wrote Republic?", True),
    ("In 1964, who became the youngest winner of the Nobel Peace Prize?", True),
    ("To what country does the island of Leyte belong, known for the Battle of Leyte Gulf in WW2?", True),
    # the clue clusters, which passed with a score of 1 (relative clause; apposition)
    ("What superhero is followed in the American comic book series that started as a horror comics anthology "
     "and introduced the fictional realm based on Norse mythology?", True),
    ("What is the name of this South Asian island country, located in the Indian Ocean for which Ahmed Abdulla "
     "is a professional footballer?", True),
    ("Which river originates in the Taurus Mountains, and flows through Syria and Iraq?", True),
    ("What large flightless bird found in Mauritius by the Portuguese is believed to have died out in 1681?", True),
    # minimal-need questions
    ("Who is the father of Kane Cornes?", False),
    ("What superhero is followed in Journey into Mystery?", False),  # "is followed in" asks, describes nothing
    ("Where was Kane Cornes born?", False),
    ("Jack Alfred Evans played with a football club team that is based in what city in Australia?", False),
    ("In which country is Abuja?", False),
    ("In what city was Muhammad born?", False),
    ("Which US president won the Nobel Peace Prize in 1920?", False),  # one attribute: still a question
])
def test_specification_score_rejects_fingerprints_at_the_documented_threshold(question: str,
                                                                              fingerprinted: bool) -> None:
    spec = specification(question)
    assert (spec.score >= SPECIFICATION_THRESHOLD) is fingerprinted, spec
    assert len(spec.cues) == spec.score


def test_a_clue_cluster_counts_one_cue_per_descriptive_clause() -> None:
    spec = specification("What superhero is followed in the American comic book series that started as a horror "
                         "comics anthology and introduced the fictional realm based on Norse mythology?")
    assert spec.cues == ["relative_clause: series that", "coordinated_clause: and introduced the",
                         "participle: based"]


def test_the_subjects_own_name_is_no_cue() -> None:
    assert specification("Who directed 2001: A Space Odyssey, 1968?", ["2001: A Space Odyssey"]).cues == [
        "number: 1968", "apposition: ,"]


def _diamond() -> tuple[dict[str, Document], LinkGraph]:
    mids = [f"m{i}" for i in range(1, 5)]
    docs = [Document(id="s", title="Sorel", links=["t", *mids],
                     text="Sorel was born in Tarn. " + " ".join(f"Sorel once visited the town of Mid{i[1]}."
                                                                 for i in mids))]
    docs += [Document(id=m, title=f"Mid{m[1]}", links=["t", "s"],
                      text=f"Mid{m[1]} lies on the road to Tarn. Sorel came by once.") for m in mids]
    docs += [Document(id="t", title="Tarn", links=[], text="Tarn is a city.")]
    return {d.id: d for d in docs}, LinkGraph.from_documents(docs)


def test_a_question_naming_a_chain_page_never_gets_that_chain() -> None:
    pages, graph = _diamond()
    narrated = _triple("a", "Where was Sorel born after visiting Mid1?", "s", "t", ["Tarn"])
    skipped = []
    for seed in range(8):
        built = construct_hintfree([narrated], graph, pages,
                                   config=ConstructionConfig(seed=seed, require_grounding=False, keep_detours=True))
        (question,) = built.detours
        assert question.path[1] != "m1" and question.hint_screen["passed"]
        skipped.append(question.hint_screen["narrated_paths_skipped"])
    assert 1 in skipped  # the seeded order did try the narrated path first, and skipped it
    only = {k: v for k, v in pages.items() if k not in ("m2", "m3", "m4")}
    only["s"] = only["s"].model_copy(update={"links": ["t", "m1"]})
    built = construct_hintfree([narrated], LinkGraph.from_documents(only.values()), only,
                               config=ConstructionConfig(require_grounding=False))
    assert built.rejected == {"path_narration": 1}
    fingerprint = _triple("b", "Where, in 1901, was Sorel born?", "s", "t", ["Tarn"])
    assert construct_hintfree([fingerprint], graph, pages).rejected == {"specification_hint": 1}


# ----------------------------------------------------------------------------- typed facts and entailment

AFRICA = [
    Document(id="Abuja", title="Abuja", links=["Nigeria"],
             text="Abuja is the capital city of Nigeria. It has many parks."),
    Document(id="Nigeria", title="Nigeria", links=["Africa", "Abuja"],
             text="Nigeria is a country in West Africa. Abuja is its capital."),
    Document(id="Africa", title="Africa", links=[], text="Africa is the second largest continent on Earth."),
]


def test_typed_facts_give_minimal_need_seeds_and_an_entailing_chain() -> None:
    pages = {d.id: d for d in AFRICA}
    facts = extract_facts(AFRICA)
    assert {(f.subject, f.relation, f.object) for f in facts.facts} == {  # "capital city of": both patterns
        ("Abuja", "capital_of", "Nigeria"), ("Abuja", "located_in", "Nigeria"), ("Nigeria", "located_in", "Africa")}
    assert facts.kinds == {"Abuja": "city", "Nigeria": "country", "Africa": "continent"}
    typed = TypedGraph(facts.facts)
    seeds = fact_seeds(typed, facts, pages, source="tiny", max_hops=4).seeds
    assert sorted(s.question for s in seeds) == ["In which continent is Abuja?", "In which continent is Nigeria?",
                                                 "In which country is Abuja?"]
    config = ConstructionConfig(keep_detours=True)
    built = construct_hintfree(seeds, LinkGraph.from_documents(AFRICA), pages, config=config, typed=typed)
    (question,) = built.questions
    assert question.triple.question == "In which continent is Abuja?" and question.path == ["Abuja", "Nigeria",
                                                                                           "Africa"]
    assert question.chain_entailment["entailing"] and question.chain_entailment["validator"] == "relation-composition"
    assert question.chain_entailment["hop_relations"] == [["capital_of", "located_in"], ["located_in"]]
    assert not question.direct_link  # Abuja never linked Africa: the typed chain itself confirms the subject
    # each hop's sub-question asks for what that hop's sentence states
    assert [(h["question"], h["statement"]) for h in question.hop_questions] == [
        ("Of what is Abuja the capital?", "Abuja is the capital city of Nigeria."),
        ("Where is Nigeria?", "Nigeria is a country in West Africa.")]
    # "In which country is Abuja?" has no typed route once its direct link is removed: never released
    assert all(not q.chain_entailment["entailing"] for q in built.detours)
    assert built.rejected.get("not_entailing", 0) == len(built.detours)


def test_the_hop_mix_reports_target_against_what_the_graph_allowed() -> None:
    pages = {d.id: d for d in AFRICA}
    facts = extract_facts(AFRICA)
    typed = TypedGraph(facts.facts)
    seeds = fact_seeds(typed, facts, pages, source="tiny", max_hops=4).seeds
    config = ConstructionConfig(max_questions=2, hop_targets={2: 0.5, 3: 0.5})
    built = construct_hintfree(seeds, LinkGraph.from_documents(AFRICA), pages, config=config, typed=typed)
    assert built.hop_mix is not None
    assert built.hop_mix["2"]["achieved"] == 1 and built.hop_mix["2"]["target"] == 1
    assert built.hop_mix["3"]["short_by"] == 1 and "only 0 entailing 3-hop" in built.hop_mix["3"]["reason"]
    assert parse_hop_mix("2:0.15,3:0.55,4:0.30") == {2: 0.15, 3: 0.55, 4: 0.30}
    for bad in ("2:0.5", "1:0.5,2:0.5", "two:1", "2:1.5,3:-0.5"):
        with pytest.raises(ConfigError, match="--hops"):
            parse_hop_mix(bad)


def test_a_hop_sub_question_asks_for_its_own_statement_china_to_beijing() -> None:
    """The issue's case: China -> Beijing was asked as a seed question about an ambassador's seat."""
    docs = [Document(id="Mao", title="Mao Zedong", links=["Beijing", "China"],
                     text="Mao Zedong died in Beijing. Mao Zedong led China for decades."),
            Document(id="China", title="China", links=["Beijing"],
                     text="China is a large country. The capital of China is Beijing."),
            Document(id="Beijing", title="Beijing", links=[], text="Beijing is a big city.")]
    pages = {d.id: d for d in docs}
    ambassador = _triple("a", "In which city is the ambassador of the Rabat-Salé-Kénitra administrative region "
                              "to China based?", "China", "Beijing", ["Beijing"])
    death = _triple("b", "Where did Mao Zedong die?", "Mao", "Beijing", ["Beijing"])
    built = construct_hintfree([ambassador, death], LinkGraph.from_documents(docs), pages,
                               config=ConstructionConfig(require_grounding=False, keep_detours=True))
    (question,) = built.detours
    assert question.path == ["Mao", "China", "Beijing"]
    hop = question.hop_questions[1]
    assert hop["page"] == "China" and hop["target"] == "Beijing" and "ambassador" not in hop["question"]
    assert hop["question"] == 'Fill in the blank, about "China": The capital of China is ____.'
    assert hop["statement"] == "The capital of China is Beijing." and hop["answers"] == ["Beijing"]


def _judging(replies: dict[int, str]) -> ScriptedServer:
    """A scripted model whose reply depends on how many hop statements the prompt shows."""
    def reply(request: ScriptedRequest) -> Reply:
        return Reply(replies[sum(line.startswith("- ") for line in request.text.splitlines())])
    return ScriptedServer(reply, key=None)


@pytest.mark.parametrize(("replies", "entailing", "sufficiency"), [
    ({2: "YES: together they say it.", 1: "NO: one hop is missing."}, True, "yes"),
    ({2: "YES", 1: "YES: one statement is enough"}, False, "yes"),  # a hop is not needed
    ({2: "NO: the hops only mention the next page.", 1: "NO"}, False, "no"),  # a mention-only detour
    ({2: "The statements establish the answer.", 1: "NO"}, False, "unparseable"),  # prose is never a pass
])
def test_the_llm_validator_judges_sufficiency_and_necessity(replies: dict[int, str], entailing: bool,
                                                            sufficiency: str) -> None:
    pages, graph = _diamond()
    with _judging(replies) as server:
        judge = LLMEntailmentJudge(server.url, "scripted")
        built = construct_hintfree([_triple("a", "Where was Sorel born?", "s", "t", ["Tarn"])], graph, pages,
                                   config=ConstructionConfig(require_grounding=False, keep_detours=True), judge=judge)
    (question,) = built.questions if entailing else built.detours
    record = question.chain_entailment
    assert record["entailing"] is entailing and record["validator"] == "llm:scripted"
    assert record["sufficiency"] == sufficiency
    assert len(record["necessity"]) == (2 if sufficiency == "yes" else 0)
    assert parse_yes_no("**Yes**, both") == "yes" and parse_yes_no("Not yes") is None


def test_memorised_questions_are_dropped_unless_kept_marked() -> None:
    pages, graph = _diamond()
    with _judging({2: "YES", 1: "NO"}) as server:
        built = construct_hintfree([_triple("a", "Where was Sorel born?", "s", "t", ["Tarn"])], graph, pages,
                                   config=ConstructionConfig(require_grounding=False),
                                   judge=LLMEntailmentJudge(server.url, "scripted"))
    screened = {"a": {"screened": True, "answered_without_search": True, "prediction": "Tarn"}}
    dropped, records = apply_screen(built, screened, keep_memorised=False)
    assert dropped.questions == [] and dropped.rejected["memorised"] == 1 and dropped.hop_distribution == {}
    kept, records = apply_screen(built, screened, keep_memorised=True)
    assert len(kept.questions) == 1 and records is not None and records["a"]["kept_memorised"] is True


def test_a_compass_word_is_skipped_only_when_no_linked_title_starts_with_it() -> None:
    docs = [Document(id="Belfast", title="Belfast", links=["Northern_Ireland", "Ireland"],
                     text="Belfast is the largest city in Northern Ireland and a port."),
            Document(id="Lagos", title="Lagos", links=["Nigeria"], text="Lagos is the largest city in southern Nigeria."),
            Document(id="Northern_Ireland", title="Northern Ireland", links=[], text="A place."),
            Document(id="Ireland", title="Ireland", links=[], text="An island."),
            Document(id="Nigeria", title="Nigeria", links=[], text="A country.")]
    facts = {(f.subject, f.relation, f.object) for f in extract_facts(docs).facts}
    assert ("Belfast", "largest_city_of", "Northern_Ireland") in facts and ("Lagos", "largest_city_of", "Nigeria") in facts
    assert not any(obj == "Ireland" for _, _, obj in facts)


def test_a_person_retains_or_excludes_questions_through_the_audits_review_file(tmp_path) -> None:
    import json

    from aethersearch.audit.review import apply_review_file
    from aethersearch.construct.page_release import build_page_release
    from aethersearch.construct.release_writer import companion_path
    from aethersearch.errors import ShortageError

    def build(review=None):  # type: ignore[no-untyped-def]
        return build_page_release(AFRICA, tmp_path / "rel", name="tiny", source_dataset="tiny",
                                  corpus={"kind": "tiny"}, review=review, overwrite=True)

    built = build()
    manifest = json.loads((built.path / "manifest.json").read_text())
    (undecided,) = manifest["construction"]["triples"]["review"]["decisions"]
    assert undecided["decided_by"] == "construction (no human decision yet)"
    template = companion_path(built.path, "question_review.todo.json")
    entries = json.loads(template.read_text())
    assert entries[0]["pair"] == ["In which continent is Abuja?", "Africa"] and entries[0]["decision"].startswith("TODO")
    assert entries[0]["chain"] == ["Abuja", "Nigeria", "Africa"]
    entries[0].update(decision="retain", reason="each hop states containment; checked by hand")
    template.write_text(json.dumps(entries))
    reviews = tmp_path / "question_reviews.json"
    assert apply_review_file(template, reviews) == (1, 0, 0)  # what `aether review TEMPLATE --out FILE` does
    manifest = json.loads((build(reviews).path / "manifest.json").read_text())
    (decided,) = manifest["construction"]["triples"]["review"]["decisions"]
    assert decided["decided_by"] == "review" and decided["decision"] == "retain"
    entries[0].update(decision="exclude", reason="too easy")
    reviews.write_text(json.dumps([{k: entries[0][k] for k in ("pair", "decision", "reason")}]))
    with pytest.raises(ShortageError, match="human_rejected"):
        build(reviews)
