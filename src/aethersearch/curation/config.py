"""The build config: which official files, how many questions from each, which training data to exclude.

Why a pydantic model: a typo in a key (``planed: 200``) must fail loudly with the
file and field, not silently fall back to a default; and the resolved config is
written into the manifest so a release says exactly how it was made.

Where the inputs are is not part of what a release *is*: the data files' paths
(``sources[].path``, path options such as ``aliases``) are written relative to
``data_root``, which is itself relative to the config file. The manifest records
the paths relative to the data root (``qa/nq_open/NQ-open.dev.jsonl``: the file's
place in the published data set, with its sha256) and leaves ``data_root`` out
(``BuildConfig.recorded``), so the same config placed at any depth beside the data
builds byte-identical releases, and the builder's directories never reach them.
The replay finds the inputs again through the config file (``data_root``).
Config-side files (``training_registry``, ``exclusions``, ``audit.reviews``) are
relative to the config file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from aethersearch.config_files import read_mapping, validation_message

__all__ = ["BuildConfig", "LoadedConfig", "SourceConfig", "load_config", "parse_config"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceConfig(_Strict):
    """One official source file and its place in the plan."""

    dataset: str = Field(description="source_dataset written into every row, e.g. 'nq'")
    format: str = Field(description="adapter name, see aethersearch.sources.FORMATS")
    path: str = Field(description="the file, relative to the config's data_root (recorded as written)")
    split: str = Field(description="the upstream split, e.g. 'dev', 'test', 'validation'")
    planned: int | None = Field(default=None, ge=0, description="planned count; default planned_per_source")
    cap: int | None = Field(default=None, ge=0, description="most this source can supply by plan "
                            "(Bamboogle: 125); the rest of its planned count is redistributed")
    source_file: str | None = Field(default=None, description="label for source_file; default the file name")
    options: dict[str, Any] = Field(default_factory=dict, description="adapter options, e.g. aliases")
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$",
                               description="optional pin: the build refuses the file if its hash differs")
    citation: str | None = None
    license: str | None = None
    variant: str | None = Field(default=None, description="the release variant the card names, e.g. 'NQ-Open' or "
                                "'unfiltered.nocontext'; default: the format name")

    @field_validator("dataset")
    @classmethod
    def _dataset_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"dataset name {value!r} must match {_NAME.pattern}")
        return value


class BuildConfig(_Strict):
    """A whole release: name, seed, plan, sources, training registry and optional audit."""

    schema_version: int = 1
    name: str = Field(description="release name; row ids are <name>_0001, <name>_0002, ...")
    file_stem: str | None = Field(default=None, description="release files are named <file_stem>.jsonl, "
                                  "<file_stem>_manifest.json, ... (default: name; the card's is eval_1400)")
    deviations: list[str] = Field(default_factory=list, description="deviations from the published card, "
                                  "recorded in the manifest and the generated card")
    data_root: str = Field(default=".", description="where the data files are, relative to the config file "
                           "(or absolute); a locator only: the release records paths relative to it, never it")
    revision: str = "1.0.0"
    description: str = ""
    seed: int = 42
    planned_per_source: int = Field(default=200, ge=0)
    sources: list[SourceConfig] = Field(min_length=1)
    training_registry: str | None = Field(default=None, description="training registry file (YAML/JSON)")
    exclusions: str | list[dict[str, Any]] | None = Field(
        default=None, description="reviewed exclusions: a list file (YAML/JSON) or the entries inline")
    audit: dict[str, Any] | None = Field(default=None, description="opaque section for aethersearch.audit")
    max_audit_rounds: int = Field(default=10, ge=1)
    license: str = "other"
    hub_repo: str | None = Field(default=None, description="the Hub dataset id the card's load_dataset example uses "
                                 "(default: the release directory)")
    reference_card: dict[str, Any] | None = Field(
        default=None, description="the published card this build reproduces, for the card's 'differs' notes: "
        "name, questions, quotas (dataset -> count) and stages (e.g. SFT, DPO, RL)")

    @field_validator("name")
    @classmethod
    def _release_name(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_-]*$", value):
            raise ValueError(f"release name {value!r} must be letters, digits, '_' or '-'")
        return value

    @field_validator("file_stem")
    @classmethod
    def _file_stem(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z0-9][A-Za-z0-9_-]*$", value):
            raise ValueError(f"file_stem {value!r} must be letters, digits, '_' or '-'")
        return value

    @property
    def stem(self) -> str:
        """The stem the release's files are named by."""
        return self.file_stem or self.name

    @model_validator(mode="after")
    def _unique_datasets(self) -> BuildConfig:
        names = [source.dataset for source in self.sources]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"dataset names must be unique, repeated: {repeated}")
        return self

    def recorded(self) -> dict[str, Any]:
        """The config as the manifest records it: everything but the ``data_root`` locator."""
        return self.model_dump(mode="json", exclude={"data_root"})

    def planned_for(self, source: SourceConfig) -> int:
        """The planned count of ``source`` (its own, or the config default)."""
        return self.planned_per_source if source.planned is None else source.planned


class LoadedConfig(NamedTuple):
    """A validated config and the directory its relative paths are resolved against."""

    config: BuildConfig
    path: Path | None
    base_dir: Path

    def resolve(self, relative: str) -> Path:
        """An absolute path for a config-side file (registry, exclusions, reviews) written in the config."""
        path = Path(relative)
        return path if path.is_absolute() else self.base_dir / path

    @property
    def data_dir(self) -> Path:
        """The data root: the directory data file paths are written against."""
        return self.resolve(self.config.data_root)

    def data(self, relative: str) -> Path:
        """An absolute path for a data file (source, path option) written in the config."""
        path = Path(relative)
        return path if path.is_absolute() else self.data_dir / path


def parse_config(data: dict[str, Any], *, base_dir: Path, path: Path | None = None) -> LoadedConfig:
    """Validate an in-memory config; relative paths resolve against ``base_dir``."""
    try:
        config = BuildConfig.model_validate(data)
    except ValidationError as exc:
        raise validation_message(path or "<config>", exc, what="build config") from None
    return LoadedConfig(config, path, base_dir)


def load_config(path: str | Path) -> LoadedConfig:
    """Read and validate a build config file (YAML or JSON)."""
    path = Path(path).resolve()
    return parse_config(read_mapping(path, what="build config"), base_dir=path.parent, path=path)
