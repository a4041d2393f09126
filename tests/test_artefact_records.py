"""The typed records of the artefacts written on disk and read elsewhere, frozen: fields, types and bytes.

Why: each of these files is written in one place and read in another (a sandbox's
action log by ``aether import sandbox`` and the restart, ``noise.json`` by
``compare`` and the report, ``factorised_questions.jsonl`` by the report, the paired
comparison and the viewer, ``probes.json`` by ``factorise`` and the report,
``factorised.json`` by the report, a ``watch`` history by the report and the restart,
an index's ``index.json`` by every backend), and was a dict built by hand on each side. A field
renamed, retyped or dropped changes a format users hold on disk. The tables below
are each record's JSON schema (field names, their types, ``?`` where a reader
accepts the key absent), nested records included: a change to any of them is a
format change, made on purpose here or not at all. The round trips write with the
writer and read with the reader.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from aethersearch.compare.noise import (
    NOISE_FILE,
    MetricNoise,
    NoiseBinding,
    NoiseFile,
    QuestionNoise,
    RerunBinding,
    read_noise,
)
from aethersearch.compare.watch import HistoryRow
from aethersearch.diagnostics.factorised import (
    EpisodeEvidence,
    FactorisedRow,
    episode_rows,
    episodes_from_rows,
    read_factorised_rows,
)
from aethersearch.diagnostics.probes_file import (
    FactorisedFile,
    ProbesFile,
    read_factorised,
    read_probes,
    write_factorised,
    write_probes,
)
from aethersearch.errors import DataError
from aethersearch.jsonl import atomic_write_json, dumps_pretty, sha256_file, write_jsonl
from aethersearch.records import Outcome, ToolCall
from aethersearch.sandbox.action_log import (
    EVENTS,
    NO_ANSWER,
    ActionLog,
    CallEvent,
    CloseEvent,
    OpenEvent,
    RefusedEvent,
    ServeEvent,
    read_episodes,
    read_events,
    read_served,
)
from aethersearch.scoring.scores_file import MetricEstimate
from aethersearch.search.base import IndexManifest

TOOL_CALL = {"tool": "string", "arguments?": "object", "returned_ids?": "array[string]",
             "suppressed_ids?": "array[string]", "error?": "string | null", "elapsed_s?": "number",
             "started_at?": "number | null"}
METRIC_ESTIMATE = {"mean": "number | null", "ci_low": "number | null", "ci_high": "number | null", "n": "integer"}
METRIC_NOISE = {"flip_rate": "MetricEstimate | null", "questions_flipping": "integer", "questions_measured": "integer",
                "floor_at_run_size": "number | null"}

FROZEN: dict[type[BaseModel], dict[str, dict[str, str]]] = {
    OpenEvent: {"OpenEvent": {"event?": "'open'", "episode_id": "string", "question_id": "string", "run_id": "string",
                              "owner_sha256?": "string | null"}},
    CallEvent: {"CallEvent": {"event?": "'call'", "episode_id": "string", "seq": "integer", "status": "integer",
                              "call": "ToolCall"},
                "ToolCall": TOOL_CALL},
    RefusedEvent: {"RefusedEvent": {"event?": "'refused'", "episode_id": "string", "status": "integer",
                                    "reason": "string"}},
    CloseEvent: {"CloseEvent": {"event?": "'close'", "episode_id": "string", "question_id": "string",
                                "run_id": "string", "calls": "integer", "answer?": "string | null"}},
    ServeEvent: {"ServeEvent": {"event?": "'serve'", "release_id": "string | null", "corpus_hash": "string | null",
                                "index_hash": "string | null", "mask_policy": "string"}},
    NoiseFile: {"NoiseFile": {**METRIC_NOISE, "convention": "string", "metric": "string", "reruns": "integer",
                              "sample": "integer", "seed": "integer", "concurrencies": "array[integer]",
                              "errors": "integer", "run_size": "integer", "by_metric?": "object[MetricNoise]",
                              "per_question": "array[QuestionNoise]", "bound_to": "NoiseBinding"},
                "MetricEstimate": METRIC_ESTIMATE,
                "MetricNoise": METRIC_NOISE,
                "NoiseBinding": {"scores_sha256": "string", "run_json_sha256": "string",
                                 "reruns": "array[RerunBinding]"},
                "QuestionNoise": {"id": "string", "correct": "array[number | null]", "flip_rate": "number | null"},
                "RerunBinding": {"dir": "string", "concurrency": "integer", "traces_sha256": "string"}},
    FactorisedRow: {"FactorisedRow": {"id": "string", "source": "string", "hops": "integer | null",
                                      "evidence": "array[string]", "gathered": "array[string]",
                                      "parametric?": "array[string]", "sufficient": "boolean",
                                      "search_score": "integer", "evidence_coverage": "number", "outcome": "Outcome",
                                      "correct": "boolean", "sample?": "integer | null"},
                    "Outcome": {"enum": "answered | abstained | no_answer_tag | budget | endpoint_error | tool_error "
                                        "| truncated | request_rejected"}},
    IndexManifest: {"IndexManifest": {"kind": "'aethersearch-index'", "schema_version": "integer", "backend": "string",
                                      "config": "object", "corpus_hash": "string", "corpus_size": "integer",
                                      "store": "string", "build_stats": "object", "artefacts": "object[string]",
                                      "index_hash": "string"}},
    FactorisedFile: {"FactorisedFile": {
        "overall?": "object[number | integer | null] | null",
        "by_hops?": "object[object[number | integer | null]] | null",
        "by_source?": "object[object[number | integer | null]] | null", "n?": "integer | number | null",
        "definitions?": "object[string] | null", "samples?": "integer | null", "reduced?": "string | null",
        "missing?": "array[string] | null", "run?": "object | null", "parametric_source?": "string | null",
        "correctness?": "string | object | null"}},
    HistoryRow: {"HistoryRow": {"checkpoint": "string", "location?": "string | null", "kind?": "string | null",
                                "step?": "integer | null", "status?": "string", "metrics?": "object | null",
                                "error?": "string | null", "attempt?": "integer | null",
                                "will_retry?": "boolean | null", "evaluated_at?": "string | null",
                                "elapsed_s?": "number | null"}},
    ProbesFile: {
        "ProbesFile": {"forget?": "ForgetProbe | null", "lead_astray?": "LeadAstrayProbe | null",
                       "distractors?": "DistractorProbe | null",
                       "degradation?": "Degradation | null"},
        "Degradation": {"forget_rate?": "number | null", "forget_n_eligible?": "integer | null",
                        "lead_astray_rate?": "number | null",
                        "lead_astray_n_eligible?": "integer | null",
                        "forget_minus_lead_astray?": "number | null",
                        "difference_reason?": "string | null"},
        "DistractorProbe": {"ratio?": "number | null", "seed?": "integer | null", "n?": "integer | null",
                            "n_eligible?": "integer | null",
                            "n_distracted?": "integer | null",
                            "distractor_rate?": "number | null",
                            "pass_at_1_clean?": "number | null",
                            "pass_at_1_noisy?": "number | null",
                            "pass_at_1_drop?": "number | null",
                            "distracted_ids?": "array[string] | null",
                            "definition?": "string | null",
                            "probe_dir?": "string | null"},
        "ForgetProbe": {"applicable?": "boolean | null", "n_hops?": "integer | null",
                        "forget_rate?": "number | null",
                        "n_eligible?": "integer | null",
                        "eligible_ids?": "array[string] | null",
                        "reason?": "string | null", "n_forget?": "integer | null",
                        "forget_ids?": "array[string] | null",
                        "forget_rate_reason?": "string | null",
                        "definition?": "string | null",
                        "n_known_in_isolation?": "integer | null",
                        "n_forgotten?": "integer | null",
                        "known_hop_forget_rate?": "number | null",
                        "isolated_accuracy?": "number | null",
                        "n_questions_with_known_hop?": "integer | null",
                        "n_questions_forgetting?": "integer | null",
                        "question_forget_rate?": "number | null",
                        "forgotten?": "array[string] | null",
                        "failed_at?": "object[integer | null] | null",
                        "known_hop_definition?": "string | null",
                        "model?": "string | null", "probe_dir?": "string | null",
                        "parametric?": "object[array[string]] | null"},
        "LeadAstrayProbe": {"applicable?": "boolean | null", "n_eligible?": "integer | null",
                            "n_led_astray?": "integer | null",
                            "lead_astray_rate?": "number | null",
                            "eligible_ids?": "array[string] | null",
                            "led_astray_ids?": "array[string] | null",
                            "clean_pages?": "object[integer] | null",
                            "definition?": "string | null",
                            "probe_dir?": "string | null"}},
}


def _type(prop: dict[str, Any]) -> str:
    """A JSON schema property as a short type: ``string | null``, ``array[integer]``, a record's name."""
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[1]
    if "anyOf" in prop:
        return " | ".join(_type(p) for p in prop["anyOf"])
    if "const" in prop:
        return repr(prop["const"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"array[{_type(prop['items'])}]" if "items" in prop else "array"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"object[{_type(prop['additionalProperties'])}]"
    return str(kind)


def shape(model: type[BaseModel]) -> dict[str, dict[str, str]]:
    """Every record of ``model``'s schema (itself and those it nests): field -> type, ``?`` when not required."""
    schema = model.model_json_schema()
    found: dict[str, dict[str, str]] = {}
    for name, part in [(schema["title"], schema), *sorted(schema.get("$defs", {}).items())]:
        if "enum" in part:  # an enumeration a field takes (an outcome): its values are part of the format
            found[name] = {"enum": " | ".join(map(str, part["enum"]))}
            continue
        required = set(part.get("required", []))
        found[name] = {(field if field in required else f"{field}?"): _type(prop)
                       for field, prop in part["properties"].items()}
    return found


@pytest.mark.parametrize("record", list(FROZEN), ids=lambda r: r.__name__)
def test_the_on_disk_records_are_frozen(record: type[BaseModel]) -> None:
    assert shape(record) == FROZEN[record], f"{record.__name__}: an on-disk format changed (on purpose: update FROZEN)"


def test_every_action_log_event_kind_is_frozen() -> None:
    assert set(EVENTS.values()) <= set(FROZEN)
    assert {kind: record.model_fields["event"].default for kind, record in EVENTS.items()} == {
        kind: kind for kind in EVENTS}


def _call(**fields: Any) -> ToolCall:
    return ToolCall(**{"tool": "search", "arguments": {"query": "Ülm “x”", "k": 3}, **fields})


async def _write_log(path: Path) -> None:
    log = ActionLog(path, size=0)
    await log.served("rel-1", "c" * 64, None, "chain-mask/v3")
    await log.opened("e1", "q1", "run-a", "ab" * 32)
    await log.opened("e2", "q2", "run-a")
    await log.called("e1", 0, 200, _call(returned_ids=["p1", "p2"], suppressed_ids=["p9"], elapsed_s=0.0123,
                                         started_at=1765000000.25))
    await log.called("e1", 1, 404, _call(tool="visit", arguments={"page": "nope"}, error="no such page"))
    await log.refused("e2", 429, "over the action cap of 3")
    await log.closed("e1", "q1", "run-a", 2, answer="Paris")
    await log.closed("e2", "q2", "run-a", 0, answer=None)
    await log.opened("e3", "q3", "run-b")
    await log.closed("e3", "q3", "run-b", 0)  # no body: no answer
    log.close()


#: the lines the log's writer wrote before its events were records (the same inputs): the format, byte for byte
EXPECTED_LINES = [
    b'{"corpus_hash":"' + b"c" * 64 + b'","event":"serve","index_hash":null,"mask_policy":"chain-mask/v3",'
    b'"release_id":"rel-1"}',
    b'{"episode_id":"e1","event":"open","owner_sha256":"' + b"ab" * 32 + b'","question_id":"q1","run_id":"run-a"}',
    b'{"episode_id":"e2","event":"open","owner_sha256":null,"question_id":"q2","run_id":"run-a"}',
    '{"call":{"arguments":{"k":3,"query":"Ülm “x”"},"elapsed_s":0.0123,"error":null,"returned_ids":["p1","p2"],'
    '"started_at":1765000000.25,"suppressed_ids":["p9"],"tool":"search"},"episode_id":"e1","event":"call","seq":0,'
    '"status":200}'.encode(),
    b'{"call":{"arguments":{"page":"nope"},"elapsed_s":0.0,"error":"no such page","returned_ids":[],'
    b'"started_at":null,"suppressed_ids":[],"tool":"visit"},"episode_id":"e1","event":"call","seq":1,"status":404}',
    b'{"episode_id":"e2","event":"refused","reason":"over the action cap of 3","status":429}',
    b'{"answer":"Paris","calls":2,"episode_id":"e1","event":"close","question_id":"q1","run_id":"run-a"}',
    b'{"answer":null,"calls":0,"episode_id":"e2","event":"close","question_id":"q2","run_id":"run-a"}',
    b'{"episode_id":"e3","event":"open","owner_sha256":null,"question_id":"q3","run_id":"run-b"}',
    b'{"calls":0,"episode_id":"e3","event":"close","question_id":"q3","run_id":"run-b"}',
]


def test_the_action_log_round_trips_through_its_event_records(tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    asyncio.run(_write_log(path))
    assert path.read_bytes().splitlines() == EXPECTED_LINES
    events = read_events(path)
    assert events == [
        ServeEvent(release_id="rel-1", corpus_hash="c" * 64, index_hash=None, mask_policy="chain-mask/v3"),
        OpenEvent(episode_id="e1", question_id="q1", run_id="run-a", owner_sha256="ab" * 32),
        OpenEvent(episode_id="e2", question_id="q2", run_id="run-a", owner_sha256=None),
        CallEvent(episode_id="e1", seq=0, status=200, call=_call(returned_ids=["p1", "p2"], suppressed_ids=["p9"],
                                                                  elapsed_s=0.0123, started_at=1765000000.25)),
        CallEvent(episode_id="e1", seq=1, status=404, call=_call(tool="visit", arguments={"page": "nope"},
                                                                  error="no such page")),
        RefusedEvent(episode_id="e2", status=429, reason="over the action cap of 3"),
        CloseEvent(episode_id="e1", question_id="q1", run_id="run-a", calls=2, answer="Paris"),
        CloseEvent(episode_id="e2", question_id="q2", run_id="run-a", calls=0, answer=None),
        OpenEvent(episode_id="e3", question_id="q3", run_id="run-b", owner_sha256=None),
        CloseEvent(episode_id="e3", question_id="q3", run_id="run-b", calls=0),
    ]
    assert [e.answered for e in events if isinstance(e, CloseEvent)] == [True, True, False]
    assert read_served(path) == events[:1]
    episodes = read_episodes(path)
    assert [(e.answer, e.owner_sha256, e.statuses) for e in episodes.values()] == [
        ("Paris", "ab" * 32, [200, 404]), (None, None, []), (NO_ANSWER, None, [])]


def test_an_older_log_and_a_malformed_event_are_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "actions.jsonl"
    path.write_bytes(b'{"episode_id":"e1","event":"open","question_id":"q1","run_id":"r"}\n'  # before owners
                     b'{"episode_id":"e1","event":"checkpoint"}\n')  # a kind this version does not write: skipped
    (episode,) = read_episodes(path).values()
    assert episode.owner_sha256 is None and read_events(path) == [
        OpenEvent(episode_id="e1", question_id="q1", run_id="r")]
    path.write_bytes(b'{"episode_id":"e1","event":"open","run_id":"r"}\n')
    with pytest.raises(DataError, match="bad open event") as refused:
        read_episodes(path)  # named with its line, never a KeyError
    assert refused.value.line == 1


def _noise(scores_sha256: str) -> tuple[NoiseFile, dict[str, Any]]:
    """A noise.json as :func:`measure_noise` builds it (``trusted`` records), and the dict it built before."""
    rate = MetricEstimate.trusted(mean=0.25, ci_low=0.0, ci_high=0.5, n=2)
    em = MetricNoise.trusted(flip_rate=rate, questions_flipping=1, questions_measured=2, floor_at_run_size=0.125)
    unmeasured = MetricNoise.trusted(flip_rate=None, questions_flipping=0, questions_measured=0, floor_at_run_size=None)
    record = NoiseFile.trusted(
        convention="serving_noise", metric="em", reruns=2, sample=3, seed=0, concurrencies=[1, 4],
        flip_rate=rate, questions_flipping=1, questions_measured=2, errors=2, floor_at_run_size=0.125, run_size=40,
        by_metric={"em": em, "f1": unmeasured},
        per_question=[QuestionNoise.trusted(id="q1", correct=[1.0, 0.0, 1.0], flip_rate=0.5),
                      QuestionNoise.trusted(id="q2", correct=[0.5, 0.5, None], flip_rate=0.0),
                      QuestionNoise.trusted(id="q3", correct=[None, None, 1.0], flip_rate=None)],
        bound_to=NoiseBinding.trusted(scores_sha256=scores_sha256, run_json_sha256="r" * 64,
                                      reruns=[RerunBinding.trusted(dir="noise/rerun-1", concurrency=1,
                                                                   traces_sha256="t" * 64)]))
    rate_dict = {"mean": 0.25, "ci_low": 0.0, "ci_high": 0.5, "n": 2}
    before = {
        "convention": "serving_noise", "metric": "em", "reruns": 2, "sample": 3, "seed": 0, "concurrencies": [1, 4],
        "flip_rate": rate_dict, "questions_flipping": 1, "questions_measured": 2, "errors": 2,
        "floor_at_run_size": 0.125, "run_size": 40,
        "by_metric": {"em": {"flip_rate": rate_dict, "questions_flipping": 1, "questions_measured": 2,
                             "floor_at_run_size": 0.125},
                      "f1": {"flip_rate": None, "questions_flipping": 0, "questions_measured": 0,
                             "floor_at_run_size": None}},
        "per_question": [{"id": "q1", "correct": [1.0, 0.0, 1.0], "flip_rate": 0.5},
                         {"id": "q2", "correct": [0.5, 0.5, None], "flip_rate": 0.0},
                         {"id": "q3", "correct": [None, None, 1.0], "flip_rate": None}],
        "bound_to": {"scores_sha256": scores_sha256, "run_json_sha256": "r" * 64,
                     "reruns": [{"dir": "noise/rerun-1", "concurrency": 1, "traces_sha256": "t" * 64}]},
    }
    return record, before


def test_noise_json_round_trips_through_its_record(tmp_path: Path) -> None:
    (tmp_path / "scores.json").write_text("{}")
    written, before = _noise(sha256_file(tmp_path / "scores.json"))
    atomic_write_json(tmp_path / NOISE_FILE, written)
    assert (tmp_path / NOISE_FILE).read_bytes() == dumps_pretty(before)  # the bytes the dict-built file had
    assert read_noise(tmp_path) == written


def test_factorised_rows_round_trip_and_carry_a_sample_only_when_there_is_one(tmp_path: Path) -> None:
    episode = EpisodeEvidence(id="q1", source="webdetective", hops=2, evidence=("A", "B"), gathered=frozenset({"A"}),
                              parametric=frozenset({"B"}), outcome=Outcome.ANSWERED, correct=True, searched_route=True)
    single, sampled = episode_rows([episode]), episode_rows([episode], sample=1)
    assert "sample" not in single[0].line() and sampled[0].line()["sample"] == 1
    write_jsonl(tmp_path / "rows.jsonl", [row.line() for row in single + sampled])
    back = read_factorised_rows(tmp_path / "rows.jsonl")
    assert back == single + sampled and episodes_from_rows(back)[0] == episode
    # the exact line a K = 1 run writes (keys sorted, no sample)
    assert (tmp_path / "rows.jsonl").read_text().splitlines()[0] == (
        '{"correct":true,"evidence":["A","B"],"evidence_coverage":1.0,"gathered":["A"],"hops":2,"id":"q1",'
        '"outcome":"answered","parametric":["B"],"search_score":1,"source":"webdetective","sufficient":true}')


def test_a_factorised_row_that_is_not_one_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "q1", "source": "x"}\n')
    with pytest.raises(DataError, match=r"rows.jsonl:1: not a factorised row") as info:
        read_factorised_rows(path)
    assert "aether factorise" in info.value.fix


def test_probes_json_keeps_each_summary_s_fields_as_written_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    written = {"forget": {"applicable": False, "n_hops": 3, "forget_rate": None, "n_eligible": None,
                          "eligible_ids": None, "reason": "no model"},
               "lead_astray": {"lead_astray_rate": 0.25, "n_eligible": 4}}  # an older, shorter summary still reads
    atomic_write_json(tmp_path / "probes.json", written)
    probes = read_probes(tmp_path)
    assert probes.line() == written  # a null stays null, an absent field stays absent
    write_probes(tmp_path, probes)
    assert read_probes(tmp_path).line() == written
    atomic_write_json(tmp_path / "probes.json", {"forget": {"rate": 0.1}})
    with pytest.raises(DataError, match="forget.rate"):
        read_probes(tmp_path)


def test_factorised_json_keeps_integer_counts_and_sample_means_as_written(tmp_path: Path) -> None:
    figures = {"overall": {"knowledge_sufficiency": 0.5, "n": 4, "f1_good_refusal": None}, "n": 4.0, "samples": 2,
               "reduced": "mean", "by_hops": {"2": {"n": 2}}, "correctness": "exact match"}
    write_factorised(tmp_path, figures)
    read = read_factorised(tmp_path)
    assert read is not None and read.line() == figures
    assert isinstance(read.line()["overall"]["n"], int) and isinstance(read.line()["n"], float)
    atomic_write_json(tmp_path / "factorised.json", {"overall": {"knowledge_sufficiency": "high"}})
    with pytest.raises(DataError, match="overall.knowledge_sufficiency"):
        read_factorised(tmp_path)
