"""Small, deterministic source files in every official layout, drawn from the embedded demo world.

Why: ``make demo`` and the tests must build a real release end to end with no
download, and that release must be answerable from the demo world's corpus
(``aethersearch.corpus.demo_world``): every question here is one of the world's
own facts or two-hop compositions, so its answer is on the world's pages.

Layouts written: NQ-Open jsonl, TriviaQA official JSON, PopQA ``test.tsv``,
HotpotQA distractor JSON, 2WikiMultiHopQA JSON + ``id_aliases.json``, MuSiQue
jsonl (with one unanswerable row, which is skipped), Bamboogle CSV; plus a
training registry whose files (DPR TSV, FlashRAG jsonl, question list JSON,
Search-R1 parquet, R1-Searcher jsonl) repeat a few demo questions, so the
exclusion really removes something, and a build config. The plan is 20 per
source with Bamboogle capped at 11, so its shortfall of 9 is redistributed
(22/22/22/21/21/21/11) like the card's 213/213/213/212/212/212/125.
"""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from typing import Any

import orjson
import yaml

from aethersearch.corpus.demo_builder import DemoFact, DemoMultiHop
from aethersearch.corpus.demo_world import DemoWorld, generate_world
from aethersearch.jsonl import atomic_write_bytes, atomic_write_text, encode_jsonl, sha256_file

__all__ = ["BAMBOOGLE_ROWS", "PER_SOURCE_ROWS", "PLANNED", "write_demo_sources"]

PER_SOURCE_ROWS = 30
BAMBOOGLE_ROWS = 11
PLANNED = 20


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


def _sentences(text: str) -> list[str]:
    parts = [p.strip() for p in text.replace("\n", " ").split(". ") if p.strip()]
    return [p if p.endswith(".") else p + "." for p in parts]


class _Writer:
    def __init__(self, world: DemoWorld, out: Path, seed: int) -> None:
        self.world = world
        self.out = out
        self.rng = random.Random(f"demo-sources:{seed}")
        self.pages = {doc.id: doc for doc in world.documents}
        facts = list(world.facts)
        self.rng.shuffle(facts)
        self.facts = facts
        compositional = [m for m in world.multihop_questions if m.kind == "compositional"]
        comparison = [m for m in world.multihop_questions if m.kind == "comparison"]
        self.rng.shuffle(compositional)
        self.rng.shuffle(comparison)
        self.compositional = compositional
        self.comparison = comparison

    def title(self, page_id: str) -> str:
        return self.pages[page_id].title

    def context(self, page_ids: list[str]) -> list[list[Any]]:
        return [[self.title(p), _sentences(self.pages[p].text)] for p in page_ids]

    # ------------------------------------------------------------------ single-hop layouts

    def nq(self, facts: list[DemoFact]) -> None:
        rows = [{"question": f.question.rstrip("?").lower(), "answer": f.answers} for f in facts]
        rows.append(dict(rows[0]))  # an internal duplicate: de-duplication keeps the first
        atomic_write_bytes(self.out / "nq_open" / "NQ-open.dev.jsonl",
                           b"".join(orjson.dumps(r) + b"\n" for r in rows))

    def triviaqa(self, facts: list[DemoFact], shared: DemoFact) -> None:
        data = []
        for i, f in enumerate([*facts, shared], start=1):
            data.append({
                "Answer": {"Aliases": f.answers, "NormalizedAliases": [a.lower() for a in f.answers],
                           "NormalizedValue": f.answers[0].lower(), "Type": "WikipediaEntity", "Value": f.answers[0]},
                "EntityPages": [{"DocSource": "TagMe", "Filename": f"{f.subject_id}.txt",
                                 "Title": self.title(f.subject_id)}],
                "Question": f.question, "QuestionId": f"demo_tc_{i}", "QuestionSource": "demo-world",
                "SearchResults": [],
            })
        atomic_write_bytes(self.out / "triviaqa" / "unfiltered-web-dev.json",
                           _json({"Data": data, "Domain": "Web", "Split": "dev", "VerifiedEval": False,
                                  "Version": 1.0}))

    def popqa(self, facts: list[DemoFact]) -> None:
        header = ["id", "subj", "prop", "obj", "subj_id", "prop_id", "obj_id", "s_aliases", "o_aliases", "s_uri",
                  "o_uri", "s_wiki_title", "o_wiki_title", "s_pop", "o_pop", "question", "possible_answers"]
        lines = ["\t".join(header)]
        for i, f in enumerate(facts, start=1):
            subj = self.title(f.subject_id)
            cells = [str(1000 + i), subj, f.relation, f.answers[0], str(i), "0", str(5000 + i), "[]",
                     orjson.dumps(f.answers[1:]).decode(), f"demo://{f.subject_id}",
                     f"demo://{f.answer_id or ''}", subj, self.title(f.answer_id) if f.answer_id else "",
                     str(100 + i), str(200 + i), f.question, orjson.dumps(f.answers).decode()]
            lines.append("\t".join(cells))
        atomic_write_text(self.out / "popqa" / "test.tsv", "\n".join(lines) + "\n")

    def bamboogle(self, questions: list[DemoMultiHop]) -> None:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["Question", "Answer"])
        for m in questions:
            writer.writerow([m.question, m.answers[0]])
        atomic_write_text(self.out / "bamboogle" / "test.csv", buffer.getvalue())

    # ------------------------------------------------------------------ multi-hop layouts

    def hotpotqa(self, questions: list[DemoMultiHop]) -> None:
        rows = []
        for i, m in enumerate(questions):
            rows.append({"_id": f"{0x5a000000 + i:08x}demo", "question": m.question, "answer": m.answers[0],
                         "supporting_facts": [[self.title(p), 0] for p in m.supporting_pages],
                         "context": self.context(m.supporting_pages),
                         "type": "comparison" if m.kind == "comparison" else "bridge",
                         "level": ("easy", "medium", "hard")[i % 3]})
        atomic_write_bytes(self.out / "hotpotqa" / "hotpot_dev_distractor_v1.json", _json(rows))

    def twowiki(self, questions: list[DemoMultiHop]) -> None:
        rows, aliases = [], []
        for i, m in enumerate(questions):
            qid = f"Q{9000 + i}"
            rows.append({"_id": f"{i:08x}2wikidemo", "type": m.kind, "question": m.question,
                         "context": self.context(m.supporting_pages),
                         "supporting_facts": [[self.title(p), 0] for p in m.supporting_pages],
                         "evidences": [[self.title(s["page"]), s["relation"], s["answer"]] for s in m.decomposition],
                         "answer": m.answers[0], "answer_id": qid})
            aliases.append({"Q_id": qid, "aliases": m.answers[1:], "demonyms": []})
        atomic_write_bytes(self.out / "2wikimultihopqa" / "dev.json", _json(rows))
        atomic_write_bytes(self.out / "2wikimultihopqa" / "id_aliases.json", encode_jsonl(aliases))

    def musique(self, questions: list[DemoMultiHop], unanswerable: DemoMultiHop) -> None:
        rows = []
        for i, m in enumerate([*questions, unanswerable]):
            paragraphs = [{"idx": j, "title": self.title(p), "paragraph_text": self.pages[p].text,
                           "is_supporting": True} for j, p in enumerate(m.supporting_pages)]
            steps = [{"id": 100 * i + j, "question": s["question"], "answer": s["answer"],
                      "paragraph_support_idx": j} for j, s in enumerate(m.decomposition)]
            rows.append({"id": f"2hop__{100 * i}_{100 * i + 1}", "paragraphs": paragraphs, "question": m.question,
                         "question_decomposition": steps, "answer": m.answers[0], "answer_aliases": m.answers[1:],
                         "answerable": m is not unanswerable})
        atomic_write_bytes(self.out / "musique" / "musique_ans_v1.0_dev.jsonl", encode_jsonl(rows))

    # ------------------------------------------------------------------ training registry

    def training(self, overlaps: dict[str, list[str]], other: list[DemoFact]) -> list[dict[str, Any]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        tdir = self.out / "train"
        sft_tsv = [*overlaps["SFT"], *(f.question for f in other[:10])]
        atomic_write_text(tdir / "nq_train_slice.tsv",
                          "".join(f"{q}\t{['demo']!r}\n" for q in sft_tsv))
        atomic_write_bytes(tdir / "flashrag_train.jsonl", encode_jsonl(
            {"id": f"train_{i}", "question": f.question, "golden_answers": f.answers}
            for i, f in enumerate(other[10:20])))
        atomic_write_bytes(tdir / "dpo_questions.json", _json(
            [{"question": q, "answer": "demo"} for q in overlaps["DPO"]]
            + [{"question": f.question, "answer": f.answers[0]} for f in other[20:30]]))
        rl = [*overlaps["RL"], *(f.question for f in other[30:40])]
        table = pa.table({"id": [f"train_{i}" for i in range(len(rl))], "question": rl,
                          "golden_answers": [["demo"] for _ in rl], "data_source": ["nq"] * len(rl)})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)  # into memory, then one atomic write: never a half-written parquet
        atomic_write_bytes(tdir / "searchr1_train.parquet", sink.getvalue().to_pybytes())
        atomic_write_bytes(tdir / "stage_2.jsonl", encode_jsonl(
            {"idx": i, "question": f.question, "answer": f.answers[0]} for i, f in enumerate(other[40:50])))
        files = [
            ("SFT", "demo-sft", "canonical", "nq_train_slice.tsv", "dpr_tsv"),
            ("SFT", "demo-sft", "historical", "flashrag_train.jsonl", "flashrag_jsonl"),
            ("DPO", "demo-dpo", "canonical", "dpo_questions.json", "qa_list_json"),
            ("RL", "demo-rl", "canonical", "searchr1_train.parquet", "searchr1_parquet"),
            ("RL", "demo-rl", "historical", "stage_2.jsonl", "r1searcher_jsonl"),
        ]
        return [{"stage": stage, "release": release, "role": role, "path": name, "format": fmt,
                 "sha256": sha256_file(tdir / name)} for stage, release, role, name, fmt in files]


def write_demo_sources(out_dir: Path, *, seed: int = 0) -> Path:
    """Write the demo sources, training registry and build config under ``out_dir``; return the config path."""
    out = Path(out_dir)
    world = generate_world(seed)
    w = _Writer(world, out, seed)
    n = PER_SOURCE_ROWS
    facts = w.facts
    nq, trivia, popqa, other = facts[:n], facts[n:2 * n], facts[2 * n:3 * n], facts[3 * n:3 * n + 60]
    comp = w.compositional
    hotpot = [*comp[:n - 4], *w.comparison[:4]]
    twowiki = [*comp[n:2 * n - 4], *w.comparison[4:8]]
    musique = comp[2 * n:3 * n]
    bamboogle = comp[3 * n:3 * n + BAMBOOGLE_ROWS]
    w.nq(nq)
    w.triviaqa(trivia, shared=nq[1])  # a cross-source duplicate of an NQ question (NQ, earlier, keeps it)
    w.popqa(popqa)
    w.hotpotqa(hotpot)
    w.twowiki(twowiki)
    w.musique(musique, unanswerable=comp[3 * n + BAMBOOGLE_ROWS])
    w.bamboogle(bamboogle)
    overlaps = {"SFT": [nq[2].question.rstrip("?").lower(), trivia[3].question],
                "DPO": [popqa[4].question, hotpot[5].question.upper()],   # case differs: keys still match
                "RL": [twowiki[6].question, musique[7].question.replace(" ", ", ", 1)]}  # punctuation differs
    registry = {"schema_version": 1, "files": w.training(overlaps, other)}
    atomic_write_bytes(out / "train" / "registry.yaml", yaml.safe_dump(registry, sort_keys=False).encode())
    source = [
        ("nq", "nq_open_jsonl", "nq_open/NQ-open.dev.jsonl", "dev", {}),
        ("triviaqa", "triviaqa_json", "triviaqa/unfiltered-web-dev.json", "dev", {}),
        ("popqa", "popqa_tsv", "popqa/test.tsv", "test", {}),
        ("hotpotqa", "hotpotqa_json", "hotpotqa/hotpot_dev_distractor_v1.json", "dev", {}),
        ("2wikimultihopqa", "2wiki_json", "2wikimultihopqa/dev.json", "dev",
         {"aliases": "2wikimultihopqa/id_aliases.json"}),
        ("musique", "musique_jsonl", "musique/musique_ans_v1.0_dev.jsonl", "dev", {}),
        ("bamboogle", "bamboogle_csv", "bamboogle/test.csv", "test", {}),
    ]
    config = {
        "name": "demo", "revision": "1.0.0", "seed": 42, "planned_per_source": PLANNED,
        "description": f"Demo release drawn from the embedded demo world (seed {seed}); answerable from its corpus.",
        "license": "cc0-1.0",
        "training_registry": "train/registry.yaml",
        "sources": [{"dataset": d, "format": f, "path": p, "split": s,
                     **({"options": o} if o else {}), **({"cap": BAMBOOGLE_ROWS} if d == "bamboogle" else {}),
                     "license": "CC0-1.0 (generated demo data)"}
                    for d, f, p, s, o in source],
    }
    path = out / "build.yaml"
    atomic_write_bytes(path, yaml.safe_dump(config, sort_keys=False).encode())
    return path
