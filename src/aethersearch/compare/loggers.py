"""Optional experiment loggers for ``aether watch``: each evaluated checkpoint's metrics to wandb or TensorBoard.

Why: the history JSONL is the record, but a training run is usually watched in
wandb or TensorBoard; logging the same dict there (keys in the trainer's own
style, ``val/test_score/{source}`` and ``val-core/{source}/reward/mean@1``) puts the
frozen-release numbers on the training dashboard at the checkpoint's step.
Both are optional extras (``pip install 'aethersearch[loggers]'``); asking for
one that is not installed is a ``ConfigError`` naming the install command.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from aethersearch.errors import ConfigError

__all__ = ["LOGGERS", "MetricLogger", "TensorBoardLogger", "WandbLogger", "available", "make_loggers"]

LOGGERS: tuple[str, ...] = ("wandb", "tensorboard")


class MetricLogger(Protocol):
    """Receives one checkpoint's numeric metrics at its training step."""

    def log(self, metrics: Mapping[str, float], step: int | None) -> None:
        """Record ``metrics`` at ``step`` (None when the checkpoint has no step)."""

    def close(self) -> None:
        """Flush and release the backend."""


class TensorBoardLogger:
    """Scalars to a TensorBoard event directory (via ``tensorboardX``)."""

    def __init__(self, log_dir: Path) -> None:
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir=str(log_dir))
        self._calls = 0

    def log(self, metrics: Mapping[str, float], step: int | None) -> None:
        """One scalar per numeric metric, at ``step`` (or the call count when there is none)."""
        self._calls += 1
        for key, value in metrics.items():
            if isinstance(value, int | float):
                self.writer.add_scalar(key, float(value), global_step=step if step is not None else self._calls)
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()


class WandbLogger:
    """Metrics to a wandb run (``mode`` ``offline`` writes locally; ``online`` needs a login)."""

    def __init__(self, project: str, log_dir: Path, mode: str = "offline") -> None:
        import wandb

        if mode not in ("online", "offline", "disabled"):  # wandb's typed modes; checked before the cast below
            raise ConfigError(f"unknown wandb mode {mode!r}", fix="use online, offline or disabled")
        wandb_mode = cast(Literal["online", "offline", "disabled"], mode)
        self.run: Any = wandb.init(project=project, dir=str(log_dir), mode=wandb_mode, reinit=True)

    def log(self, metrics: Mapping[str, float], step: int | None) -> None:
        """``wandb.log`` of the numeric metrics at ``step``."""
        numeric = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float)}
        self.run.log(numeric, step=step)

    def close(self) -> None:
        """Finish the wandb run."""
        self.run.finish()


_PACKAGES = {"wandb": "wandb", "tensorboard": "tensorboardX"}


def available(name: str) -> bool:
    """Whether the backend ``name`` can be imported here."""
    return importlib.util.find_spec(_PACKAGES[name]) is not None


def make_loggers(names: Sequence[str], *, log_dir: Path, project: str = "aethersearch",
                 wandb_mode: str = "offline") -> list[MetricLogger]:
    """Loggers for ``names``; an unknown or uninstalled one is a ``ConfigError`` before anything runs."""
    out: list[MetricLogger] = []
    for name in names:
        if name not in _PACKAGES:
            raise ConfigError(f"unknown logger {name!r}", fix=f"use one of: {', '.join(LOGGERS)}")
        if not available(name):
            raise ConfigError(f"--logger {name} needs the {_PACKAGES[name]} package",
                              fix=f"pip install {_PACKAGES[name]}  (or the 'loggers' extra)")
    for name in names:
        out.append(TensorBoardLogger(log_dir / "tensorboard") if name == "tensorboard"
                   else WandbLogger(project, log_dir, wandb_mode))
    return out
