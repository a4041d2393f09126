"""The real benchmark's build config (``eval1400``) over the public files in ``../shared/data``.

Why code and not a checked-in YAML: the data directory lives beside the
checkout, so where it is depends on where the config is written. This writes
``build.yaml`` and ``training_registry.yaml`` into a directory of your choice;
each names the data directory once (``data_root``, relative to the file) and every
file by its place in the published data set (``qa/nq_open/NQ-open.dev.jsonl``, as
``SOURCES.json`` lists it), so the release records the same paths wherever the
config sits. Every training file is pinned by the sha256
published in the data directory's ``SOURCES.json`` (not by hashing what is on
disk now, so a changed file is refused).

Sources (the card's seven): NQ-Open dev (official jsonl), TriviaQA unfiltered
dev (DPR TSV), PopQA test (only slices are available: Search-R1-style parquet of
200 or FlashRAG jsonl of 16), HotpotQA distractor dev, 2WikiMultiHopQA dev and
MuSiQue-Ans dev (complete question/answer lists), Bamboogle (R1-Searcher jsonl,
the recommended answer key). Plan: 200 per source, Bamboogle capped at 125.
The HotpotQA, 2Wiki and MuSiQue lists carry no ids, so their rows have a null
``source_id`` (their one-based row numbers still locate them in official order).
Every source file is pinned by its published sha256 too.
Training stages: SFT = the supervised training sets' question slices (DPR NQ and
TriviaQA train slices, MuSiQue-Ans train, HotpotQA train-100, MuSiQue train-100);
RL = the RL training questions (R1-Searcher stage 1/2, Search-R1 train parquet
samples). No DPO training file is public here, so there is no DPO stage.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

from aethersearch.errors import ConfigError
from aethersearch.jsonl import atomic_write_bytes
from aethersearch.release.verify_release_template import card_quotas

__all__ = ["AUDIT_SECTION", "CITATIONS", "POPQA_FILES", "POPQA_ROWS", "REFERENCE_CARD", "SOURCES", "TRAINING",
    "VARIANTS", "popqa_deviation", "write_eval1400_config"]

POPQA_FILES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "parquet200": ("search_r1_processed/graphrag_r2_popqa_test_200.parquet", "searchr1_parquet", {}),
    "flashrag16": ("flashrag_format/from_searchr1_test_sample/popqa.jsonl", "flashrag_jsonl", {}),
}
#: Rows each public PopQA slice holds: the generated plan caps PopQA there (see ``popqa_deviation``).
POPQA_ROWS = {"parquet200": 200, "flashrag16": 16}
#: The release variant each public file is (the card's "Release variant" column says what was really used).
VARIANTS = {
    "nq": "NQ-Open (official NQ-open.dev.jsonl)",
    "triviaqa": "unfiltered.nocontext dev, complete (DPR TSV layout with every alias)",
    "parquet200": "200-row public test slice (Search-R1-style parquet, one answer per row); card: official test.tsv",
    "flashrag16": "16-row public test slice (FlashRAG jsonl); card: official test.tsv",
    "hotpotqa": "Distractor v1 dev, complete question/answer list",
    "2wikimultihopqa": "dev, complete question/answer list (no entity-alias file is public here)",
    "musique": "MuSiQue-Ans v1.0 dev, answerable questions, complete question/answer list",
    "bamboogle": "Complete 125-question release (R1-Searcher jsonl answer key)",
}
#: The published card this config reproduces: its questions, stages and (via ``card_quotas``) composition.
REFERENCE_CARD = {"name": "Eval-1400 card", "questions": 1400, "stages": ["SFT", "DPO", "RL"]}
AUDIT_SECTION = {"reviews": "audit_reviews.json"}  # the template goes to audit_reviews.todo.json beside it

SOURCES: list[tuple[str, str, str, str, dict[str, Any]]] = [
    ("nq", "nq_open_jsonl", "qa/nq_open/NQ-open.dev.jsonl", "dev", {}),
    ("triviaqa", "triviaqa_dpr_tsv", "qa/triviaqa/topics.dpr.trivia.test.txt", "dev", {}),
    ("popqa", "", "", "test", {}),
    ("hotpotqa", "qa_list_json", "qa/hotpotqa/hotpotqa_dev_questions_and_answers.json", "dev", {}),
    ("2wikimultihopqa", "qa_list_json", "qa/2wikimultihopqa/dev_questions_and_answers.json", "dev", {}),
    ("musique", "qa_list_json", "qa/musique/musique_ans_dev_questions_and_answers.json", "dev", {}),
    ("bamboogle", "bamboogle_jsonl", "qa/bamboogle/r1searcher_bamboogle.jsonl", "test", {"cap": 125}),
]

TRAINING: list[tuple[str, str, str, str, str]] = [
    ("SFT", "dpr-nq-train-slice", "canonical", "train/nq/topics.dpr.nq.dev.txt", "dpr_tsv"),
    ("SFT", "dpr-trivia-train-slice", "canonical", "train/triviaqa/topics.dpr.trivia.dev.txt", "dpr_tsv"),
    ("SFT", "musique-ans-train", "canonical", "train/musique/musique_ans_train_questions_and_answers.json",
     "qa_list_json"),
    ("SFT", "hotpotqa-train-100", "historical", "train/hotpotqa/hipporag_v1_hotpotqa_train100_official_format.json",
     "hotpotqa_json"),
    ("SFT", "musique-train-100", "historical", "train/musique/hipporag_v1_musique_train100_official_format.json",
     "musique_jsonl"),
    ("RL", "r1-searcher", "canonical", "train/r1searcher/stage_1.jsonl", "r1searcher_jsonl"),
    ("RL", "r1-searcher", "canonical", "train/r1searcher/stage_2.jsonl", "r1searcher_jsonl"),
    ("RL", "search-r1-nq-hotpotqa-train", "canonical",
     "search_r1_processed/searchr1_train_sample_512_nq_hotpotqa.parquet", "searchr1_parquet"),
    ("RL", "search-r1-nq-hotpotqa-train", "historical", "search_r1_processed/searchr1_train_sample_512_nq.parquet",
     "searchr1_parquet"),
]


CITATIONS = {
    "nq": 'Kwiatkowski et al., "Natural Questions: a Benchmark for Question Answering Research", TACL 2019; '
          'Lee et al., "Latent Retrieval for Weakly Supervised Open Domain Question Answering", ACL 2019',
    "triviaqa": 'Joshi et al., "TriviaQA: A Large Scale Distantly Supervised Challenge Dataset for Reading '
                'Comprehension", ACL 2017',
    "popqa": 'Mallen et al., "When Not to Trust Language Models: Investigating Effectiveness of Parametric and '
             'Non-Parametric Memories", ACL 2023',
    "hotpotqa": 'Yang et al., "HotpotQA: A Dataset for Diverse, Explainable Multi-hop Question Answering", EMNLP 2018',
    "2wikimultihopqa": 'Ho et al., "Constructing A Multi-hop QA Dataset for Comprehensive Evaluation of Reasoning '
                       'Steps", COLING 2020',
    "musique": 'Trivedi et al., "MuSiQue: Multihop Questions via Single-hop Question Composition", TACL 2022',
    "bamboogle": 'Press et al., "Measuring and Narrowing the Compositionality Gap in Language Models", '
                 'Findings of EMNLP 2023',
}


def _published(shared_data: Path) -> dict[str, dict[str, Any]]:
    path = shared_data / "SOURCES.json"
    try:
        records = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the data directory's SOURCES.json ({exc})",
                          fix="point shared_data at ../shared/data") from None
    return {record["dest"]: record for record in records}


def write_eval1400_config(shared_data: Path, out_dir: Path, *,
                          popqa: Literal["parquet200", "flashrag16"] = "parquet200",
                          popqa_plan: dict[str, int] | None = None, audit: bool = True) -> Path:
    """Write ``build.yaml`` + ``training_registry.yaml`` for the real benchmark; returns the config path.

    The card plans 200 per source and its redistribution gives PopQA 213, but
    the public slices hold only 200 (or 16) PopQA rows. By default the plan
    caps PopQA at its slice's size, so the card's rule redistributes the rest
    and the release still has 1,400 questions; the deviation is recorded in the
    config (-> manifest and card). ``popqa_plan`` overrides PopQA's
    ``planned``/``cap``. The config turns the near-duplicate audit on (reviews
    in ``audit_reviews.json`` beside it) and names the files ``eval_1400*``.
    """
    # abspath, not resolve(): following a symlinked data folder to its target would write the builder's
    # directory layout (``../../../x/y/shared/...``) into the config and from there into the release
    shared_data = Path(os.path.abspath(shared_data))
    out_dir = Path(os.path.abspath(out_dir))
    published = _published(shared_data)

    data_root = os.path.relpath(shared_data, out_dir)

    sources = []
    for dataset, fmt, path, split, extra in SOURCES:
        options: dict[str, Any] = {}
        if dataset == "popqa":
            path, fmt, options = POPQA_FILES[popqa]
            extra = dict(popqa_plan) if popqa_plan is not None else {"cap": POPQA_ROWS[popqa]}
        record = published.get(path, {})
        sources.append({"dataset": dataset, "format": fmt, "path": path, "split": split, **extra,
                        "variant": VARIANTS[popqa if dataset == "popqa" else dataset],
                        **({"sha256": record["sha256"]} if record.get("sha256") else {}),
                        **({"options": options} if options else {}), "citation": CITATIONS[dataset] + (
                            f"; file from {record['repo']} @ {record['commit'][:12]} : {record['path']}"
                            if record.get("repo") and record.get("commit") else ""),
                        **({"license": record["license"]} if record.get("license") else {})})
    files = []
    for stage, release, role, path, fmt in TRAINING:
        if path not in published:
            raise ConfigError(f"{path} is not listed in {shared_data / 'SOURCES.json'}",
                              fix="every training file must have a published sha256")
        files.append({"stage": stage, "release": release, "role": role, "path": path, "format": fmt,
                      "sha256": published[path]["sha256"]})
    atomic_write_bytes(out_dir / "training_registry.yaml",
                       yaml.safe_dump({"schema_version": 1, "data_root": data_root, "files": files}, sort_keys=False).encode())
    deviations = popqa_deviation(sources, popqa) + [
        "Training stages: no DPO training file is public here, so the registry has SFT and RL stages only (the "
        "card registers SFT, DPO and RL); the exclusion union is built from the public training slices."]
    reference = {**REFERENCE_CARD, "quotas": card_quotas(_card_plan(sources))[0]}
    config = {"name": "eval1400", "file_stem": "eval_1400", "data_root": data_root, "revision": "1.0.0", "seed": 42,
              "planned_per_source": 200, "deviations": deviations, "license": "unknown", "reference_card": reference,
              **({"audit": dict(AUDIT_SECTION)} if audit else {}),
              "description": "Seven open-domain QA sources (NQ, TriviaQA, PopQA, HotpotQA, 2Wiki, MuSiQue, "
                             "Bamboogle), isolated from the checkpoints' training questions.",
              "training_registry": "training_registry.yaml", "sources": sources}
    config_path = out_dir / "build.yaml"
    atomic_write_bytes(config_path, yaml.safe_dump(config, sort_keys=False).encode())
    return config_path


def _card_plan(sources: list[dict[str, Any]]) -> list[tuple[str, int, int | None]]:
    """The published card's plan over these sources: 200 each, Bamboogle capped at its 125."""
    return [(s["dataset"], 200, 125 if s["dataset"] == "bamboogle" else None) for s in sources]


def popqa_deviation(sources: list[dict[str, Any]], popqa: str) -> list[str]:
    """The generated plan's deviation from the card, in words, with the quotas the card's rule gives."""
    entry = next(s for s in sources if s["dataset"] == "popqa")
    if entry.get("cap") is None and entry.get("planned") is None:
        return []
    plan = [(s["dataset"], s.get("planned", 200), s.get("cap")) for s in sources]
    before, _ = card_quotas(_card_plan(sources))
    after, _ = card_quotas(plan)
    return [f"PopQA: the public data holds only the {POPQA_ROWS[popqa]}-row PopQA test slice ({popqa}), fewer "
            f"than the card's {before['popqa']}. The plan gives PopQA planned {entry.get('planned', 200)} and cap "
            f"{entry.get('cap')}, and the card's redistribution rule deals the remaining questions to the other "
            "sources. Quotas of this build: " + ", ".join(f"{d} {q}" for d, q in after.items())
            + "; the card's: " + ", ".join(f"{d} {q}" for d, q in before.items()) + "."]
