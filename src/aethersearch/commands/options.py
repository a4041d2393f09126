"""Option parsing shared by the command modules."""

from __future__ import annotations

from typing import Any

__all__ = ["parse_key_values"]


def parse_key_values(pairs: list[str] | None, *, flag: str, example: str) -> dict[str, Any]:
    """Repeatable ``KEY=VALUE`` options; a value is parsed as JSON when it can be (``1.2``, ``null``).

    ``flag`` and ``example`` name the option in the error, e.g. ``--set`` and ``--set k1=1.2``.
    """
    import orjson

    from aethersearch.errors import ConfigError

    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {pair!r} is not KEY=VALUE", fix=f"e.g. {example}")
        try:
            out[key] = orjson.loads(value)
        except orjson.JSONDecodeError:
            out[key] = value
    return out
