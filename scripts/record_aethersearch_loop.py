"""Record AetherSearch's own eval loop on a release, driven by the scripted behaviours (run by hand).

Usage: python scripts/record_aethersearch_loop.py THEIR_SRC COMMIT RELEASE_DIR WIKISPEEDIA_DIR OUT.json.gz [PRED.jsonl]

With PRED.jsonl, also writes their prediction lines as their worker writes them
(``json.dumps(prediction, sort_keys=True)``), question i taken from behaviour i mod 4:
the fixture of ``aether import aethersearch``.

Their ``runtime/fixed_eval.py`` loads our ``aether export verl`` parquet of the
release (so the run also shows their loader accepting it), and their
``runtime/async_eval_worker._evaluate_row`` runs every question under each
behaviour of ``tests/agents/aethersearch_behaviours.py``. Only the model and the
retriever are stand-ins: ``model.generate`` answers with the behaviour's text
tokenized like the scripted server (whitespace-led pieces) plus an EOS id, and
the retriever returns the same word-overlap ranking our test environment uses.
Their code is imported from THEIR_SRC, never copied here.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import re
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_PIECE = re.compile(r"\s*\S+|\s+\Z")  # the scripted server's /tokenize


def digest(value: Any) -> str:
    """A short sha256 of a JSON value (the fixture stores hashes, not texts)."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()[:16]


class _Tensor:
    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows
        self.shape = (len(rows), len(rows[0]))

    def __getitem__(self, key: tuple[int, slice]) -> _Tensor:
        row, cut = key
        return _Tensor([self.rows[row][cut]]) if self.rows[row][cut] else _Empty()

    def detach(self) -> _Tensor:
        return self

    def cpu(self) -> _Tensor:
        return self

    def tolist(self) -> list[int]:
        return self.rows[0]


class _Empty(_Tensor):
    def __init__(self) -> None:
        self.rows, self.shape = [[]], (1, 0)


def _fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.long = "long"  # type: ignore[attr-defined]
    torch.tensor = lambda rows, dtype=None, device=None: _Tensor([list(r) for r in rows])  # type: ignore[attr-defined]
    torch.ones_like = lambda t: t  # type: ignore[attr-defined]
    torch.inference_mode = contextlib.nullcontext  # type: ignore[attr-defined]
    return torch


class PieceTokenizer:
    """HF-tokenizer stand-in with the scripted server's pieces; ``<|im_end|>`` is the special EOS."""

    def __init__(self, eos: str) -> None:
        self.pieces: list[str] = [eos]
        self.vocab: dict[str, int] = {eos: 0}
        self.eos_token_id = 0
        self.pad_token_id = 0

    def ids(self, text: str) -> list[int]:
        out = []
        for piece in _PIECE.findall(text):
            if piece not in self.vocab:
                self.vocab[piece] = len(self.pieces)
                self.pieces.append(piece)
            out.append(self.vocab[piece])
        return out

    def __call__(self, text: str, add_special_tokens: bool = False,
                 return_attention_mask: bool = False) -> dict[str, list[int]]:
        return {"input_ids": self.ids(text)}

    def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool = True,
                            tokenize: bool = True) -> list[int]:
        turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return self.ids(turns + "<|im_start|>assistant\n")

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(self.pieces[i] for i in ids if not (skip_special_tokens and i == self.eos_token_id))


class ScriptedModel:
    """``model.generate`` answering with a behaviour's text, then EOS (HF: EOS counts in max_new_tokens)."""

    def __init__(self, tokenizer: PieceTokenizer, behaviour: Any) -> None:
        self.tokenizer = tokenizer
        self.behaviour = behaviour

    def generate(self, input_ids: _Tensor, max_new_tokens: int, **_: Any) -> _Tensor:
        context = input_ids.rows[0]
        reply = self.tokenizer.ids(self.behaviour(self.tokenizer.decode(context)))
        new = (reply + [self.tokenizer.eos_token_id])[:max_new_tokens]
        return _Tensor([context + new])


class Retriever:
    """Their ``HybridRetrieverClient.retrieve`` answered by the test environment's ranking."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def retrieve(self, queries: list[str]) -> Any:
        docs = tuple(types.SimpleNamespace(contents=d.contents) for d in self.env.rank(queries[0], 3))
        return types.SimpleNamespace(documents_by_query=(docs,))


def main(their_src: str, commit: str, release_dir: str, wikispeedia: str, out: str,
         predictions_out: str = "") -> None:
    sys.modules["torch"] = _fake_torch()
    sys.path.insert(0, their_src)
    from agentic_rl.runtime import async_eval_worker as worker  # type: ignore[import-not-found]
    from agentic_rl.runtime.fixed_eval import (  # type: ignore[import-not-found]
        create_or_validate_eval_manifest,
        load_eval_rows,
    )

    from aethersearch.agents.prompts import search_r1_question
    from aethersearch.interop.exports import export_verl
    from aethersearch.scoring.join import load_release
    from tests.agents.aethersearch_behaviours import EOS, OverlapEnv, behaviours, corpus

    release = load_release(Path(release_dir))
    gold = {search_r1_question(row.question): row.answers[0] for row in release}
    with tempfile.TemporaryDirectory() as tmp:
        parquet = Path(tmp) / "val.parquet"
        sidecar = export_verl(Path(release_dir), parquet)
        manifest = create_or_validate_eval_manifest(
            validation_path=parquet, manifest_path=Path(tmp) / "manifest.json",
            expected_validation_sha256=sidecar.file_sha256, expected_row_count=sidecar.rows,
            expected_source_counts=sidecar.source_counts)
        rows = load_eval_rows(manifest=manifest)
    observations: list[str] = []
    original = worker._information_token_ids

    def recording(tokenizer: Any, documents: Any, maximum_tokens: int) -> tuple[list[int], str]:
        ids, text = original(tokenizer, documents, maximum_tokens)
        observations.append(text)
        return ids, text

    worker._information_token_ids = recording
    config = {"formal_schedule": {"maximum_prompt_length": 2048, "maximum_response_length": 6144,
                                  "maximum_model_length": 8192},
              "rollout": {"max_search_turns": 5, "max_model_tokens_per_turn": 500,
                          "max_information_tokens_per_turn": 500}}
    env = OverlapEnv(corpus(Path(wikispeedia)))
    episodes = []
    mixed: dict[str, dict[str, Any]] = {}
    for number, (name, behaviour) in enumerate(behaviours(gold).items()):
        tokenizer = PieceTokenizer(EOS)
        model = ScriptedModel(tokenizer, behaviour)
        for index, row in enumerate(rows):
            observations.clear()
            result = worker._evaluate_row(model=model, tokenizer=tokenizer, retriever=Retriever(env), row=row,
                                          update=0, config=config)
            episodes.append({"behaviour": name, "id": row["id"], "actions": digest(result["model_actions"]),
                             "n_actions": len(result["model_actions"]), "search_count": result["search_count"],
                             "observations": [digest(o) for o in observations], "r_task": result["R_task"],
                             "answer": result["answer"], "system_valid": result["system_valid"]})
            if index % 4 == number:
                mixed[row["id"]] = result
    if predictions_out:
        Path(predictions_out).write_text("".join(json.dumps(mixed[row["id"]], sort_keys=True) + "\n"
                                                 for row in rows), encoding="utf-8")
    payload = {"their_repo": "Muradil-mamat-211/AetherSearch", "their_commit": commit,
               "their_function": "agentic_rl.runtime.async_eval_worker._evaluate_row",
               "release_eval_sha256": sidecar.release_eval_sha256, "rows": len(rows),
               "episodes": episodes}
    Path(out).write_bytes(gzip.compress(json.dumps(payload, sort_keys=True).encode(), mtime=0))
    print(f"{len(episodes)} episodes over {len(rows)} rows; their loader read {manifest['counts']}")


if __name__ == "__main__":
    main(*sys.argv[1:7])
