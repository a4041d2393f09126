"""Text encoders for the faiss backend, following Search-R1's encode path exactly.

Why these conventions: Search-R1 checkpoints are trained against the index built by
``search_r1/search/index_builder.py`` and queried by ``search_r1/search/retrieval_server.py``
(github.com/PeterGriffinJin/Search-R1, read at a14dc3a). Their ``Encoder.encode`` does,
per batch: a prefix chosen by the retriever *name* (``"e5"`` in it: ``query: `` /
``passage: ``; ``"bge"``: the bge query instruction, no passage prefix), the fast
tokenizer with ``padding=True, truncation=True, max_length`` (256 for queries in the
server; 256 for passages in ``build_index.sh``), the model's ``last_hidden_state``
pooled by the name's method (e5 and contriever ``mean`` over the attention mask, bge
``cls``), L2 normalisation unless the name contains ``"dpr"``, fp16 where they use it
(``retrieval_use_fp16=True`` in the server, ``--use_fp16`` in ``build_index.sh``), then
float32. AetherSearch's ``hybrid_retrieval_server.py`` (d2a21bd) does the same for
queries and applies fp16 only on CUDA; so do we (fp16 matmuls on CPU are slow and not
what either project runs).

Runtime: PyTorch + ``transformers`` on CPU, or CUDA when present. We measured
onnxruntime against it (``benchmarks/encoders.py``) and chose PyTorch: it is the very
computation their code runs (so scores agree to float rounding), it loads any local
Hugging Face folder (the packaged MiniLM ships safetensors, not ONNX), and its CPU wheel
keeps CI free of the multi-GB CUDA build (``Makefile`` installs it from PyTorch's CPU index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from aethersearch.errors import ConfigError
from aethersearch.records import Record

__all__ = ["BGE_QUERY_INSTRUCTION", "EncoderConfig", "SEARCHR1_POOLING", "TransformerEncoder", "searchr1_conventions"]

BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
# index_builder.py's MODEL2POOLING: the pooling a retriever name implies (first match wins; default mean).
SEARCHR1_POOLING = {"e5": "mean", "bge": "cls", "contriever": "mean", "jina": "mean"}


class EncoderConfig(Record):
    """One encoder's model and conventions; ``searchr1_conventions`` fills them from a retriever name."""

    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    retriever_name: str = Field(default="e5", description="Search-R1's --retriever_name; picks prefixes and pooling")
    query_prefix: str = "query: "
    passage_prefix: str = "passage: "
    pooling: Literal["mean", "cls", "pooler"] = "mean"
    normalize: bool = True
    query_max_length: int = Field(default=256, ge=1)
    passage_max_length: int = Field(default=256, ge=1)
    fp16: bool = Field(default=True, description="half precision on CUDA only, as AetherSearch's server")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_size: int = Field(default=512, ge=1, description="Search-R1's server and index builder use 512")


def searchr1_conventions(retriever_name: str, model: str, **overrides: Any) -> EncoderConfig:
    """The encoder settings Search-R1's code derives from ``retriever_name`` (its substring rules, verbatim)."""
    name = retriever_name.lower()
    # retrieval_server.py applies the e5 prefix, then (independently) the bge instruction in front of it.
    query_prefix = (BGE_QUERY_INSTRUCTION if "bge" in name else "") + ("query: " if "e5" in name else "")
    passage_prefix = "passage: " if name == "e5" else ""  # index_builder: `if self.retrieval_method == "e5"`
    pooling = next((p for key, p in SEARCHR1_POOLING.items() if key in name), "mean")
    settings: dict[str, Any] = {"model": model, "retriever_name": retriever_name, "query_prefix": query_prefix,
                                "passage_prefix": passage_prefix, "pooling": pooling, "normalize": "dpr" not in name}
    return EncoderConfig(**{**settings, **overrides})


def _torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401 -- checked here so the error names both
    except ImportError:
        raise ConfigError("the faiss backend's encoder needs torch and transformers",
                          fix="pip install 'aethersearch[dense]' (CPU torch: add "
                              "--extra-index-url https://download.pytorch.org/whl/cpu)") from None
    return torch


class TransformerEncoder:
    """A Hugging Face encoder run the way Search-R1's ``Encoder.encode`` runs it (device adapted)."""

    def __init__(self, config: EncoderConfig) -> None:
        from aethersearch.search.dense import model_location

        torch = _torch()
        from transformers import AutoModel, AutoTokenizer

        self.config = config
        self._torch = torch
        device = config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        location = model_location(config.model)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(location, use_fast=True)
            self.model = AutoModel.from_pretrained(location)
        except OSError as exc:
            raise ConfigError(f"encoder {config.model!r} could not be loaded from {location!r}: {exc}",
                              fix="pass a local Hugging Face model folder as --encoder, or pip install "
                                  "'aethersearch[dense]' (ships all-MiniLM-L6-v2)") from None
        self.model.eval()
        self.model.to(self.device)
        if config.fp16 and self.device.type == "cuda":
            self.model.half()

    @property
    def dimension(self) -> int:
        """Width of the vectors ``encode`` returns."""
        return int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        """``(len(texts), dimension)`` float32, C-ordered: prefixed, pooled and (by convention) normalised."""
        config = self.config
        prefix = config.query_prefix if is_query else config.passage_prefix
        max_length = config.query_max_length if is_query else config.passage_max_length
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), config.batch_size):
            batch = [prefix + t for t in texts[start:start + config.batch_size]]
            out[start:start + len(batch)] = self._encode_batch(batch, max_length)
        return out

    def _encode_batch(self, batch: list[str], max_length: int) -> np.ndarray:
        torch = self._torch
        with torch.no_grad():
            inputs = self.tokenizer(batch, max_length=max_length, padding=True, truncation=True, return_tensors="pt")
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            output = self.model(**inputs, return_dict=True)
            mask = inputs["attention_mask"]
            if self.config.pooling == "mean":
                hidden = output.last_hidden_state.masked_fill(~mask[..., None].bool(), 0.0)
                emb = hidden.sum(dim=1) / mask.sum(dim=1)[..., None]
            elif self.config.pooling == "cls":
                emb = output.last_hidden_state[:, 0]
            else:
                emb = output.pooler_output
            if self.config.normalize:
                emb = torch.nn.functional.normalize(emb, dim=-1)
            return np.asarray(emb.detach().float().cpu().numpy(), dtype=np.float32, order="C")
