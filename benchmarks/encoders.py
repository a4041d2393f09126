"""CPU query/passage encoding: onnxruntime vs sentence-transformers vs our encoder (PyTorch, Search-R1's path).

Prints, measured side by side in one run on the packaged all-MiniLM-L6-v2, with every
runtime limited to ``--threads`` threads:

* queries per second, one query per call (the server's common case), and passages per
  second in batches of 64, for: ``sentence_transformers.SentenceTransformer.encode``;
  ``search.encoders.TransformerEncoder`` (PyTorch, Search-R1's pooling); onnxruntime on the
  same weights exported to ONNX here (tokenizer + session + mean pooling in numpy);
* each runtime's ratio to ours, and the largest difference of its vectors from ours;
* the installed size of ``torch`` and of ``onnxruntime``.

The choice this informs is recorded in ``search/encoders.py``. Usage::

    python benchmarks/encoders.py [--threads 1] [--queries 64]

The export needs the ``onnx`` package besides onnxruntime (torch writes the file through it).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from aethersearch.corpus.demo_world import generate_world
from aethersearch.search.dense import model_location
from aethersearch.search.encoders import TransformerEncoder, searchr1_conventions

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def rate(fn: Any, items: list[str], batch: int, passes: int) -> float:
    """Median items per second of ``fn(batch of items)`` over ``passes`` passes."""
    rates = []
    for _ in range(passes):
        start = time.perf_counter()
        for i in range(0, len(items), batch):
            fn(items[i:i + batch])
        rates.append(len(items) / (time.perf_counter() - start))
    return statistics.median(rates)


def package_mb(name: str) -> float:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return float("nan")
    return sum(p.stat().st_size for p in Path(spec.origin).parent.rglob("*") if p.is_file()) / 1e6


def onnx_encoder(folder: str, threads: int, work: Path) -> Any:
    """Export the model to ONNX (legacy exporter) and return ``encode(texts) -> normalised mean-pooled vectors``."""
    import onnxruntime
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, use_fast=True)
    model = AutoModel.from_pretrained(folder).eval()
    sample = tokenizer(["an example"], return_tensors="pt")
    names = list(sample.keys())
    path = work / "model.onnx"

    class ByName(torch.nn.Module):
        """The tokenizer's tensors passed by name: the exporter passes them by position, and the model's
        positional order (input_ids, attention_mask, token_type_ids, ...) is not the tokenizer's."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model(**dict(zip(names, tensors, strict=True))).last_hidden_state

    torch.onnx.export(ByName().eval(), tuple(sample[n] for n in names), str(path), input_names=names,
                      output_names=["last_hidden_state"], dynamo=False, opset_version=17,
                      dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names + ["last_hidden_state"]})
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def encode(texts: list[str]) -> np.ndarray:
        inputs = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
        hidden = session.run(["last_hidden_state"], {n: inputs[n].astype(np.int64) for n in names})[0]
        mask = inputs["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    return encode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    if importlib.util.find_spec("onnx") is None:  # torch's exporter writes the file through it
        raise SystemExit("the ONNX export needs the `onnx` package (not a dependency of aethersearch): "
                         "`pip install onnx`, or `pip install --target DIR onnx` and put DIR on PYTHONPATH")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    world = generate_world(seed=0)
    queries = [f.question for f in world.facts[:args.queries]]
    passages = [f'"{d.title}"\n{d.text}' for d in world.documents[:args.queries]]
    folder = model_location(MODEL)
    ours = TransformerEncoder(searchr1_conventions("plain", MODEL, device="cpu"))  # no prefixes: same text for all three
    st_model = SentenceTransformer(folder, device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        ort = onnx_encoder(folder, args.threads, Path(tmp))
        runtimes = {
            "ours (PyTorch, Search-R1 path)": lambda t: ours.encode(t, is_query=True),
            "sentence-transformers": lambda t: st_model.encode(t, batch_size=64, normalize_embeddings=True,
                                                                show_progress_bar=False),
            "onnxruntime": ort,
        }
        reference = ours.encode(passages, is_query=True)
        print(f"all-MiniLM-L6-v2 on CPU, {args.threads} thread(s), {len(queries)} queries / {len(passages)} passages, "
              f"median of {args.passes} passes; shared 2-core machine", flush=True)
        rows = {}
        for name, fn in runtimes.items():
            q = rate(fn, queries, 1, args.passes)
            p = rate(fn, passages, 64, args.passes)
            diff = float(np.abs(np.asarray(fn(passages)) - reference).max())
            rows[name] = (q, p)
            base_q, base_p = rows["ours (PyTorch, Search-R1 path)"]
            print(f"{name:32s} {q:7.1f} queries/s (x{q / base_q:.2f})  {p:7.1f} passages/s in batches of 64 "
                  f"(x{p / base_p:.2f})  max |diff| from ours {diff:.1e}", flush=True)
    print(f"installed size: torch {package_mb('torch'):.0f} MB (CPU wheel), onnxruntime {package_mb('onnxruntime'):.0f} MB")


if __name__ == "__main__":
    main()
