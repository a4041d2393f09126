"""Reading a YAML/JSON settings file, and saying which field of it is wrong.

Why on the ground floor: the build config (``curation.config``), the training
registry and the exclusion list (``isolation.training``) are all read this way,
so one reader and one error wording serve every stage without the stages
importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from aethersearch.errors import ConfigError

__all__ = ["read_mapping", "validation_message"]


def read_mapping(path: Path, *, what: str) -> dict[str, Any]:
    """Parse a YAML (``.yaml``/``.yml``) or JSON file whose top level is a mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}", fix="check the path") from None
    try:
        data = yaml.safe_load(text)  # YAML is a superset of JSON, so one parser reads both
    except yaml.YAMLError as exc:
        mark = exc.problem_mark if isinstance(exc, yaml.MarkedYAMLError) else None
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: {what} is not valid YAML/JSON: {exc}", fix="fix the syntax") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} must be a mapping at the top level, got {type(data).__name__}",
                          fix="see the example config written by `aether build --demo`")
    return data


def validation_message(path: Path | str, exc: ValidationError, *, what: str) -> ConfigError:
    """Turn the first pydantic error into a ConfigError naming file and field."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(top level)"
    return ConfigError(f"{path}: {what} field {field!r}: {first['msg']}",
                       fix="see the field descriptions in aethersearch.curation.config")
