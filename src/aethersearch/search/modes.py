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

Mode aliases (``aether serve --mode-alias hybrid=bm25``): their client always sends
``mode: hybrid``, so against a BM25-only index every search would be a 400. A server
may answer a mode it does not have with one it does, but only when started with the
alias: the policy is declared, shown in ``/health`` (``mode_aliases``) and recorded in
each run's ``run.json``; without it the 400 names the flag that would declare it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aethersearch.errors import ConfigError
from aethersearch.search.base import SearchIndex

__all__ = ["DENSE_BACKENDS", "RETRIEVAL_MODES", "SPARSE_BACKENDS", "health_facts", "parse_mode_aliases",
    "resolve_mode_aliases", "retrieval_modes"]

RETRIEVAL_MODES = ("hybrid", "dense", "sparse")
DENSE_BACKENDS = frozenset({"faiss", "dense"})
SPARSE_BACKENDS = frozenset({"bm25", "bm25-maxscore"})


def retrieval_modes(index: SearchIndex) -> dict[str, SearchIndex]:
    """Mode name -> the index that answers it: a hybrid's own ``modes()``, else the one mode a backend is."""
    own = index.modes()
    if own is not None:
        return dict(own)
    if index.backend in DENSE_BACKENDS:
        return {"dense": index}
    if index.backend in SPARSE_BACKENDS:
        return {"sparse": index}
    return {}


def parse_mode_aliases(pairs: Sequence[str]) -> dict[str, str]:
    """``["hybrid=bm25", ...]`` -> ``{"hybrid": "bm25"}``; a malformed or unknown mode is a ConfigError."""
    aliases: dict[str, str] = {}
    for pair in pairs:
        mode, sep, target = (part.strip() for part in pair.partition("="))
        if not sep or not mode or not target:
            raise ConfigError(f"--mode-alias {pair!r} is not MODE=TARGET", fix="e.g. --mode-alias hybrid=bm25")
        if mode not in RETRIEVAL_MODES:
            raise ConfigError(f"--mode-alias {pair!r}: {mode!r} is not a retrieval mode",
                              fix=f"alias one of: {', '.join(RETRIEVAL_MODES)}")
        if mode in aliases and aliases[mode] != target:
            raise ConfigError(f"--mode-alias names {mode!r} twice ({aliases[mode]!r} and {target!r})",
                              fix="give each mode one alias")
        aliases[mode] = target
    return aliases


def _served_mode(target: str) -> str:
    if target in SPARSE_BACKENDS:
        return "sparse"
    if target in DENSE_BACKENDS:
        return "dense"
    return target


def resolve_mode_aliases(aliases: dict[str, str], modes: dict[str, SearchIndex]) -> dict[str, str]:
    """Each alias -> the served mode that answers it (``bm25`` names the sparse side); refused if none does.

    An alias may not hide a mode the index serves itself (``hybrid=bm25`` on a
    hybrid index would silently change every hybrid request).
    """
    resolved: dict[str, str] = {}
    for mode, target in aliases.items():
        served = _served_mode(target)
        if mode in modes:
            raise ConfigError(f"--mode-alias {mode}={target}: this index serves {mode!r} itself",
                              fix=f"drop the alias; the index offers: {', '.join(modes)}")
        if served not in modes:
            raise ConfigError(f"--mode-alias {mode}={target}: this index does not serve {target!r}",
                              fix=f"alias to a mode it offers: {', '.join(modes) or 'none'}")
        resolved[mode] = served
    return resolved


def health_facts(index: SearchIndex, store: Any, modes: dict[str, SearchIndex],
                 aliases: dict[str, str] | None = None) -> dict[str, Any]:
    """AetherSearch's ``/health`` fields, describing the dense side when there is one, and the mode aliases."""
    dense = modes.get("dense")
    described = dense.describe() if dense is not None else None
    facts: dict[str, Any] = {"ready": True, "corpus_passages": len(store), "modes": list(modes),
                             "mode_aliases": dict(aliases or {})}
    if described is not None:
        facts.update(described)
    else:
        facts.update({"index_ntotal": len(store), "index_type": type(index).__name__, "faiss_gpu_enabled": False})
    return facts
