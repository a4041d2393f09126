"""Name -> lazily imported class maps for pluggable backends (docs/design/conventions.md, code convention 2).

An unknown name errors with the valid names and a did-you-mean; names are matched
exactly, never by substring.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any

from aethersearch.errors import ConfigError

__all__ = [
    "resolve",
]


def resolve(kind: str, name: str, table: Mapping[str, str]) -> Any:
    """Import and return the object registered as ``name`` in ``table`` ("module:attr")."""
    if name not in table:
        valid = sorted(table)
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"unknown {kind} {name!r}.{hint}",
            fix=f"use one of: {', '.join(valid)}",
        )
    module_name, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)
