"""AetherSearch's retriever contract on our server: retrieval modes, hit fields and ``/health`` facts.

Read from AetherSearch's ``runtime_assets/retriever/hybrid_retrieval_server.py`` and
``src/agentic_rl/retriever/health.py`` (github.com/Muradil-mamat-211/AetherSearch, d2a21bd):

* ``/retrieve`` takes ``mode``: ``hybrid`` (their default), ``dense`` or ``sparse``; theirs
  raises ``ValueError`` (a 500) on any other. Ours answers 400 naming the valid modes, and
  400 for a valid mode the served index cannot give (a BM25-only index has no ``dense``).
  A request without ``mode`` gets the served index as built, so Search-R1's client (which
  sends none) is unaffected.
* hits carry ``title`` and ``text`` split from ``contents`` as theirs splits it: the first
  line with ``"`` stripped from both ends, and the remaining lines.
* ``/health`` has ``ready``, ``corpus_passages``, ``index_ntotal``, ``embedding_dimension``,
  ``index_type``, ``faiss_gpu_enabled``; their trainer's gate (``query_health``) also requires
  ``faiss_gpu_enabled`` and ``index_type == "GpuIndexFlatIP"``. We report what is true: a CPU
  faiss index says ``IndexFlatIP`` and ``false`` (so their GPU gate refuses it, as it should);
  an index with no embeddings omits ``embedding_dimension`` and names its backend class.
"""

from __future__ import annotations

from typing import Any

from aethersearch.search.base import SearchIndex

RETRIEVAL_MODES = ("hybrid", "dense", "sparse")
DENSE_BACKENDS = frozenset({"faiss", "dense"})
SPARSE_BACKENDS = frozenset({"bm25", "bm25-maxscore"})


def retrieval_modes(index: SearchIndex) -> dict[str, SearchIndex]:
    """Mode name -> the index that answers it: a hybrid's own ``modes()``, else the one mode a backend is."""
    own = getattr(index, "modes", None)
    if callable(own):
        return dict(own())
    backend = getattr(index, "backend", "")
    if backend in DENSE_BACKENDS:
        return {"dense": index}
    if backend in SPARSE_BACKENDS:
        return {"sparse": index}
    return {}


def title_text(contents: str) -> tuple[str, str]:
    """AetherSearch's split of ``contents``: ``(first line stripped of '"', the other lines)``."""
    first, _, rest = contents.partition("\n")
    return first.strip('"'), rest


def health_facts(index: SearchIndex, store: Any, modes: dict[str, SearchIndex]) -> dict[str, Any]:
    """AetherSearch's ``/health`` fields, describing the dense side when there is one."""
    dense = modes.get("dense")
    describe = getattr(dense, "describe", None)
    facts: dict[str, Any] = {"ready": True, "corpus_passages": len(store), "modes": list(modes)}
    if callable(describe):
        facts.update(describe())
    else:
        facts.update({"index_ntotal": len(store), "index_type": type(index).__name__, "faiss_gpu_enabled": False})
    return facts
