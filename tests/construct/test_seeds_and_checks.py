"""Real seed questions -> (q, v0, vn); seeded choice among equal shortest paths; the LLM validator and screen."""

from __future__ import annotations

import pytest

from aethersearch.agents.scripted_server import Reply, ScriptedRequest, ScriptedServer
from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree, hop_statement
from aethersearch.construct.llm_checks import LLMChainValidator, parametric_screen, screen_counts
from aethersearch.construct.seeds import SeedQuestion, TitleIndex, read_seed_questions, resolve_seeds
from aethersearch.construct.triples import QATriple
from aethersearch.construct.validate import RuleBasedValidator
from aethersearch.corpus.graph import LinkGraph
from aethersearch.records import Document
from tests.conftest import SHARED_DATA

PAGES = {d.id: d for d in [
    Document(id="France", title="France", links=["Paris"], text="France is a country. Its capital is Paris."),
    Document(id="Paris", title="Paris", links=[], text="Paris is a city."),
    Document(id="Georgia_(country)", title="Georgia (country)", links=[], text="Georgia is a country."),
    Document(id="Park", title="Park", links=["Paris"], text="A park is an area."),
    Document(id="Candlestick_Park", title="Candlestick Park", links=[], text="A stadium."),
    Document(id="St_Paul's_Cathedral", title="St Paul's Cathedral", links=["Paris"], text="A church."),
    Document(id="London", title="London", links=["Paris"], text="London is a city."),
]}


def _seed(question: str, answers: list[str], n: int = 1) -> SeedQuestion:
    return SeedQuestion("nq_open", "dev", "qa/x.jsonl", None, n, question, answers)


@pytest.mark.parametrize(("question", "answers", "expected"), [
    ("What is the capital of France?", ["Paris"], ("France", "Paris")),  # whole capitalised run, links to vn
    ("Which country has Tbilisi as capital city, France?", ["Georgia"], ("France", "Georgia_(country)")),
    ("Who designed St Paul\u2019s Cathedral in London?", ["Paris"], ("St_Paul's_Cathedral", "Paris")),  # longest
    ("Who played at Candlestick Park in 1966?", ["Paris"], ("Candlestick_Park", "Paris")),  # not "Park"
    ("Which park is in the capital?", ["Paris"], None),  # lower-case "park" is no proper-noun mention
    ("Which Park is biggest?", ["Paris"], None),  # "which Park": after a determiner
    ("What is the capital of France?", ["Lyon"], "answer_not_a_page"),
])
def test_match_rule_table(question: str, answers: list[str], expected: object) -> None:
    result = resolve_seeds([_seed(question, answers)], PAGES)
    if expected == "answer_not_a_page":
        assert result.rejected == {"answer_not_a_page": 1}
    elif expected is None:
        assert result.rejected == {"no_subject_page": 1}
    else:
        assert [(t.subject, t.answer_page) for t in result.triples] == [expected]
        assert result.review[0]["answer_rule"] in ("title", "short_title")


def test_short_titles_only_when_unique_and_not_a_full_title() -> None:
    index = TitleIndex([*PAGES.values(), Document(id="Georgia_(U.S._state)", title="Georgia (U.S. state)", text="")])
    assert index.answer_page(["Georgia"]) is None  # two pages shorten to "georgia": ambiguous
    assert TitleIndex(PAGES.values()).answer_page(["Georgia"]) == ("Georgia_(country)", "Georgia", "short_title")


def _diamond() -> tuple[dict[str, Document], LinkGraph]:
    """s links to t directly and through four equal two-hop routes m1..m4, each stated in prose."""
    mids = [f"m{i}" for i in range(1, 5)]
    docs = [Document(id="s", title="Sorel", links=["t", *mids],
                     text="Sorel was born in Tarn. " + " ".join(f"Sorel once visited the town of Mid{i[1]}."
                                                                 for i in mids))]
    docs += [Document(id=m, title=f"Mid{m[1]}", links=["t", "s"],
                      text=f"Mid{m[1]} lies on the road to Tarn. Sorel came by once.") for m in mids]
    docs += [Document(id="t", title="Tarn", links=[], text="Tarn is a city.")]
    return {d.id: d for d in docs}, LinkGraph.from_documents(docs)


def _triple(tid: str) -> QATriple:
    return QATriple(id=tid, question="Where was Sorel born?", answers=["Tarn"], subject="s", answer_page="t",
                    relation="born_in", source_dataset="x", source_split="x", source_id=tid, source_row_number=1,
                    source_file="x")


def test_equal_shortest_paths_are_chosen_by_seed_reproducibly_with_alternatives_recorded() -> None:
    pages, graph = _diamond()
    chosen = {}
    for seed in range(8):
        config = ConstructionConfig(seed=seed, require_grounding=False)
        q = construct_hintfree([_triple("a")], graph, pages, config=config).questions[0]
        again = construct_hintfree([_triple("a")], graph, pages, config=config).questions[0]
        assert q.path == again.path  # reproducible
        assert q.equal_paths == 4 and sorted([q.path, *q.alternatives]) == [["s", m, "t"] for m in
                                                                            ("m1", "m2", "m3", "m4")]
        chosen[seed] = q.path[1]
    assert len(set(chosen.values())) > 1  # not always the alphabetically first


def test_hop_statements_are_prose_and_never_name_the_final_answer_early() -> None:
    page = Document(id="p", title="P", text="Tarn, Mid1, Mid2, Mid3, Mid4, Mid5 and more. Mid1 is near Tarn. "
                                            "People of Mid1 are many.")
    assert hop_statement(page, ["Mid1"], ["Tarn"]) == "People of Mid1 are many."
    assert hop_statement(page, ["Mid1"]) == "Mid1 is near Tarn."
    assert hop_statement(page, ["Mid9"]) is None


def _judge(request: ScriptedRequest) -> Reply:
    text = request.text
    if "Answer the question" in text:
        return Reply("Tarn" if "Sorel" in text else "no idea")
    return Reply("VALID: each hop is needed" if "Mid1" in text else "INVALID: shortcut")


def test_llm_chain_validator_and_parametric_screen_over_an_openai_compatible_endpoint() -> None:
    pages, graph = _diamond()
    with ScriptedServer(_judge, key=None) as server:
        validator = LLMChainValidator(pages, server.url, "scripted")
        results = [construct_hintfree([_triple("a")], graph, pages, validators=[RuleBasedValidator(pages),
                                                                             validator],
                                      config=ConstructionConfig(seed=seed, require_grounding=False))
                   for seed in range(8)]
        kept = [r for r in results if r.questions]
        assert kept and all(r.questions[0].path[1] == "m1" for r in kept)  # only the chain it called VALID
        assert all(r.rejected == {"llm_rejected": 1} for r in results if not r.questions)
        screen = parametric_screen(kept[0].questions, server.url, "scripted")
        assert screen["a"]["screened"] and screen["a"]["answered_correctly"]  # answerable without search: recorded
        assert screen_counts(screen) == {"screened": 1, "answered_without_search": 1, "errors": 0}
    broken = LLMChainValidator(pages, "http://127.0.0.1:9", "m", timeout_s=0.5)
    failed = construct_hintfree([_triple("a")], graph, pages, validators=[broken],
                                config=ConstructionConfig(require_grounding=False))
    assert failed.rejected == {"llm_error": 1}  # never kept unchecked


@pytest.mark.realdata
def test_real_seed_lists_are_read_and_resolved_to_wikispeedia_pages(wikispeedia_documents: list) -> None:
    questions, read = read_seed_questions(SHARED_DATA)
    statuses = {r["file"]: r["status"] for r in read}
    assert statuses["qa/nq_open/NQ-open.dev.jsonl"] == "read" and len(questions) > 30_000
    pages = {d.id: d for d in wikispeedia_documents}
    result = resolve_seeds(questions, pages)
    assert len(result.triples) + sum(result.rejected.values()) == len(questions)  # every question accounted for
    assert len(result.triples) > 300
    by_question = {r["question"]: r for r in result.review}
    capital = by_question["What is the capital of Algeria"]
    assert (capital["subject_page"], capital["answer_page"]) == ("Algeria", "Algiers")
