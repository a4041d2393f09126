"""Real seed questions -> (q, v0, vn); seeded choice among equal shortest paths; the LLM validator and screen."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree, hop_statement
from aethersearch.construct.llm_checks import (
    INVALID_REASON,
    UNPARSEABLE_REASON,
    LLMChainValidator,
    parametric_screen,
    parse_verdict,
    screen_counts,
)
from aethersearch.construct.seeds import SeedQuestion, TitleIndex, read_seed_questions, resolve_seeds
from aethersearch.construct.triples import QATriple
from aethersearch.construct.validate import RuleBasedValidator
from aethersearch.corpus.graph import LinkGraph
from aethersearch.errors import EndpointError
from aethersearch.records import Document
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
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
        config = ConstructionConfig(seed=seed, require_grounding=False, keep_detours=True)
        q = construct_hintfree([_triple("a")], graph, pages, config=config).detours[0]
        again = construct_hintfree([_triple("a")], graph, pages, config=config).detours[0]
        assert q.path == again.path  # reproducible
        assert q.equal_paths == 4 and sorted([q.path, *q.alternatives]) == [["s", m, "t"] for m in
                                                                            ("m1", "m2", "m3", "m4")]
        chosen[seed] = q.path[1]
    assert len(set(chosen.values())) > 1  # not always the alphabetically first


def test_the_seeded_choice_ranges_over_all_equal_shortest_paths_not_the_first_sixteen() -> None:
    mids = [f"m{i:02d}" for i in range(1, 41)]
    docs = [Document(id="s", title="Sorel", links=["t", *mids],
                     text="Sorel was born in Tarn. " + " ".join(f"Sorel once visited the town of Mid{m[1:]}."
                                                                 for m in mids))]
    docs += [Document(id=m, title=f"Mid{m[1:]}", links=["t"], text=f"Mid{m[1:]} lies on the road to Tarn.")
             for m in mids]
    docs += [Document(id="t", title="Tarn", links=[], text="Tarn is a city.")]
    pages, graph = {d.id: d for d in docs}, LinkGraph.from_documents(docs)
    chosen = set()
    for seed in range(40):
        q = construct_hintfree([_triple("a")], graph, pages,
                               config=ConstructionConfig(seed=seed, require_grounding=False, keep_detours=True)
                               ).detours[0]
        assert q.equal_paths == 40 and not q.equal_paths_capped and len(q.alternatives) == 8
        chosen.add(q.path[1])
    assert max(chosen) > "m16"  # index order is alphabetical: a cap of 16 would never pick m17..m40


def test_unlinked_seed_pairs_only_when_asked_and_marked() -> None:
    pages, graph, triples = _diamonds(1)
    docs = [d if d.id != "s0" else d.model_copy(update={"links": ["m0"], "text": "Sorel0 once visited the town of Mid0."})
            for d in pages.values()]
    pages, graph = {d.id: d for d in docs}, LinkGraph.from_documents(docs)
    config = ConstructionConfig(require_grounding=False)
    assert construct_hintfree(triples, graph, pages, config=config).rejected == {"no_direct_link": 1}
    q = construct_hintfree(triples, graph, pages, config=config.model_copy(update={"allow_unlinked": True,
                                                                                   "keep_detours": True})
                           ).detours[0]
    assert q.path == ["s0", "m0", "t0"] and not q.direct_link


def test_hop_statements_are_prose_and_never_name_the_final_answer_early() -> None:
    page = Document(id="p", title="P", text="Tarn, Mid1, Mid2, Mid3, Mid4, Mid5 and more. Mid1 is near Tarn. "
                                            "People of Mid1 are many.")
    assert hop_statement(page, ["Mid1"], ["Tarn"]) == "People of Mid1 are many."
    assert hop_statement(page, ["Mid1"]) == "Mid1 is near Tarn."
    assert hop_statement(page, ["Mid9"]) is None
    fragments = Document(id="q", title="Q", text="View over Mid1 Enlarge View over Mid1\n(Mid1 may be a twin town).\n"
                                                  "near Mid1 and more.\nMount Mid1 in Tarn).\n"
                                                  "Roads joined Mid1 and Tarn * Via Mala from Milan to Lindau.\n"
                                                  "Prime Ministers of Mid1 and Tarn\n"
                                                  "Representative Mid1 Jones and Senator Nelson W.\n"
                                                  "Hobart (1897) Preceded by Mid1 Succeeded by Tarn ____.")
    assert hop_statement(fragments, ["Mid1"]) is None  # image captions and sentence fragments state nothing


def _judge(request: ScriptedRequest) -> Reply:
    text = request.text
    if "Answer the question" in text:
        return Reply("Sorel was born in Tarn." if "Sorel" in text else "no idea")
    return Reply("VALID: each hop is needed" if "Mid1" in text else "INVALID: shortcut")


def test_llm_chain_validator_and_parametric_screen_over_an_openai_compatible_endpoint() -> None:
    pages, graph = _diamond()
    with ScriptedServer(_judge, key=None) as server:
        validator = LLMChainValidator(pages, server.url, "scripted")
        results = [construct_hintfree([_triple("a")], graph, pages, validators=[RuleBasedValidator(pages),
                                                                             validator],
                                      config=ConstructionConfig(seed=seed, require_grounding=False, keep_detours=True))
                   for seed in range(8)]
        kept = [r for r in results if r.detours]
        assert kept and all(r.detours[0].path[1] == "m1" for r in kept)  # only the chain it called VALID
        assert all(r.rejected == {INVALID_REASON: 1} for r in results if not r.detours)
        # no typed relations and no entailment judge: a chain the necessity check keeps is still a detour
        assert all(r.rejected == {"not_entailing": 1} and not r.questions for r in kept)
        assert validator.records["a"]["verdict"] in ("valid", "invalid")
        screen = parametric_screen(kept[0].detours, server.url, "scripted")
        # "Sorel was born in Tarn." is no exact match, but it does name the answer: recorded as answered
        assert screen["a"]["screened"] and screen["a"]["answered_without_search"]
        assert not screen["a"]["exact_match"] and screen["a"]["cover_match"]
        counts = screen_counts(screen)
        assert (counts["screened"], counts["answered_without_search"], counts["exact_match"]) == (1, 1, 0)


@pytest.mark.parametrize(("reply", "verdict"), [
    ("VALID: each hop is needed", "VALID"), ("**Invalid** - shortcut", "INVALID"), ("valid.", "VALID"),
    ("The chain is not VALID", None), ("Not valid", None), ("INVALIDATED", None), ("", None),
    ("The answer is not always a direct step from the question's subject to the answer.", None),
])
def test_only_a_first_word_verdict_counts(reply: str, verdict: str | None) -> None:
    assert parse_verdict(reply) == verdict


def _diamonds(k: int) -> tuple[dict[str, Document], LinkGraph, list[QATriple]]:
    """``k`` disjoint copies of the diamond (subject s<i>, answer t<i>, one two-hop route), one triple each."""
    docs = []
    triples = []
    for i in range(k):
        docs += [Document(id=f"s{i}", title=f"Sorel{i}", links=[f"t{i}", f"m{i}"],
                          text=f"Sorel{i} was born in Tarn{i}. Sorel{i} once visited the town of Mid{i}."),
                 Document(id=f"m{i}", title=f"Mid{i}", links=[f"t{i}"], text=f"Mid{i} lies on the road to Tarn{i}."),
                 Document(id=f"t{i}", title=f"Tarn{i}", links=[], text=f"Tarn{i} is a city.")]
        triples.append(QATriple(id=f"q{i}", question=f"Where was Sorel{i} born?", answers=[f"Tarn{i}"],
                                subject=f"s{i}", answer_page=f"t{i}", relation="born_in", source_dataset="x",
                                source_split="x", source_id=f"q{i}", source_row_number=i, source_file="x"))
    return {d.id: d for d in docs}, LinkGraph.from_documents(docs), triples


def test_garbled_replies_are_recorded_as_unparseable_never_as_a_pass() -> None:
    pages, graph, triples = _diamonds(4)
    replies = iter(["VALID because", "The chain is valid.", "Not VALID", ""])
    with ScriptedServer(lambda request: Reply(next(replies)), key=None) as server:
        validator = LLMChainValidator(pages, server.url, "scripted")
        result = construct_hintfree(triples, graph, pages, validators=[validator],
                                    config=ConstructionConfig(require_grounding=False, keep_detours=True))
    assert len(result.detours) == 1 and result.rejected == {UNPARSEABLE_REASON: 3, "not_entailing": 1}
    assert sorted(r["verdict"] for r in validator.records.values()) == ["unparseable"] * 3 + ["valid"]
    assert validator.counts()["unparseable"] == 3 and validator.counts()["judged"] == 4


def test_an_enforced_validator_that_rejects_everything_is_named_in_the_shortage() -> None:
    from aethersearch.construct.page_release import no_questions
    from aethersearch.errors import ShortageError

    pages, graph, triples = _diamonds(2)
    with ScriptedServer(lambda request: Reply("The chain is fine."), key=None) as server:
        validator = LLMChainValidator(pages, server.url, "scripted")
        result = construct_hintfree(triples, graph, pages, validators=[validator],
                                    config=ConstructionConfig(require_grounding=False, keep_detours=True))
    assert not result.detours and result.rejected == {UNPARSEABLE_REASON: 2}
    with pytest.raises(ShortageError, match="2 judged, 0 valid, 0 invalid, 2 unparseable") as caught:
        no_questions(result, [validator])
    assert "enforce=False" in str(caught.value)


def test_an_endpoint_that_dies_mid_build_stops_it_loudly() -> None:
    pages, graph, triples = _diamonds(5)
    server = ScriptedServer(lambda request: Reply("VALID"), key=None).start()
    validator = LLMChainValidator(pages, server.url, "scripted", timeout_s=2.0, backoff_s=0.01)

    def die_after_two(considered: int, candidates: int, accepted: int) -> None:
        if considered == 2:
            server.stop()

    try:
        with pytest.raises(EndpointError, match=r"failed at candidate 'q\d' after 2 answered") as caught:
            construct_hintfree(triples, graph, pages, validators=[validator], on_candidate=die_after_two,
                               config=ConstructionConfig(require_grounding=False, keep_detours=True))
    finally:
        server.stop()
    assert "--validator-endpoint" in str(caught.value) and len(validator.records) == 2
    questions = construct_hintfree(triples[:1], graph, pages,
                                   config=ConstructionConfig(require_grounding=False, keep_detours=True)).detours
    with pytest.raises(EndpointError, match="parametric screen endpoint .* failed at question 'q0' after 0"):
        parametric_screen(questions, "http://127.0.0.1:9", "m", timeout_s=0.5, backoff_s=0.01)


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


def test_redirect_aliases_name_their_page_for_answers_and_subjects() -> None:
    pages = {**PAGES, "Analysis_of_variance": Document(id="Analysis_of_variance", title="Analysis of variance",
                                                       text="", links=["France"])}
    aliases = {"Analysis_of_variance": ["ANOVA"], "France": ["French Republic"], "Paris": ["France"]}
    # the answer "ANOVA" is a redirect title: its article answers; the subject "French Republic" likewise
    result = resolve_seeds([_seed("Which test is named for the French Republic?", ["ANOVA"])], pages, aliases)
    assert [(t.subject, t.answer_page) for t in result.triples] == [("France", "Analysis_of_variance")]
    # without the aliases neither name is a page
    assert resolve_seeds([_seed("Which test is named for the French Republic?", ["ANOVA"])], pages).rejected == {
        "answer_not_a_page": 1}
    # a title wins over another page's alias of the same form ("France" stays the page France)
    assert TitleIndex(pages.values(), aliases).answer_page(["France"]) == ("France", "France", "title")
    # an alias two pages share names neither
    shared = {"Paris": ["Lutetia"], "France": ["Lutetia"]}
    assert TitleIndex(pages.values(), shared).answer_page(["Lutetia"]) is None


_WORDS = ["Paris", "Georgia", "Georgia (country)", "Georgia (U.S. state)", "Lutetia", "paris", "Mercury (planet)",
          "Mercury"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6),
       st.lists(st.lists(st.sampled_from(_WORDS), max_size=3), max_size=6))
def test_title_index_names_a_page_only_when_no_other_page_has_that_name(titles: list[str],
                                                                         aliases: list[list[str]]) -> None:
    # the reference: every page a normalised name (title, short form, alias) could mean, as sets; a name with
    # two pages names neither, a title beats another page's alias, a full title beats a short form
    from aethersearch.construct.seeds import _PAREN, _norm

    pages = {f"p{i}": title for i, title in enumerate(titles)}
    redirects = {f"p{i}": names for i, names in enumerate(aliases) if i < len(titles)}
    full: dict[str, str] = {}
    short: dict[str, set[str]] = {}
    for page, title in pages.items():
        full.setdefault(_norm(title), page)
        base = _norm(_PAREN.sub("", title))
        if base and base != _norm(title):
            short.setdefault(base, set()).add(page)
    named: dict[str, set[str]] = {}
    for page, names in redirects.items():
        for name in names:
            if _norm(name) not in full:
                named.setdefault(_norm(name), set()).add(page)
    full.update({key: next(iter(found)) for key, found in named.items() if len(found) == 1})
    expected_short = {key: next(iter(found)) for key, found in short.items() if len(found) == 1 and key not in full}
    index = TitleIndex.from_titles(pages, redirects)
    assert index.full == full
    assert index.short == expected_short
