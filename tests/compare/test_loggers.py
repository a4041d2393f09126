"""`aether watch` loggers: TensorBoard scalars land at the checkpoint's step; a missing backend is a message."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.compare.loggers import available, make_loggers
from aethersearch.compare.watch import Checkpoint, watch
from aethersearch.errors import ConfigError


def _scalars(log_dir: Path) -> list[tuple[str, int, float]]:
    """Every scalar in the TFRecord event files under ``log_dir`` (length, crc, data, crc framing)."""
    from tensorboardX.proto.event_pb2 import Event

    found = []
    for path in sorted(log_dir.rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            event = Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                found.append((value.tag, int(event.step), round(float(value.simple_value), 6)))
    return found


@pytest.mark.skipif(not available("tensorboard"), reason="tensorboardX not installed (optional 'loggers' extra)")
def test_tensorboard_gets_each_checkpoint_at_its_step(tmp_path: Path) -> None:
    listing = tmp_path / "endpoints.txt"
    listing.write_text("step-100 http://127.0.0.1:1/v1 100\nstep-200 http://127.0.0.1:2/v1 200\n")

    def fake_evaluate(checkpoint: Checkpoint) -> dict[str, Any]:
        assert checkpoint.step is not None
        return {"val/test_score/nq": checkpoint.step / 1000, "val-core/all/reward/mean@1": 0.5}

    loggers = make_loggers(["tensorboard"], log_dir=tmp_path)
    watch(listing, fake_evaluate, history=tmp_path / "history.jsonl", max_polls=1, loggers=loggers)
    for logger in loggers:
        logger.close()
    assert sorted(_scalars(tmp_path / "tensorboard")) == [
        # TensorBoard itself rewrites "@" in tags to "_" (as it does for verl's own keys)
        ("val-core/all/reward/mean_1", 100, 0.5), ("val-core/all/reward/mean_1", 200, 0.5),
        ("val/test_score/nq", 100, 0.1), ("val/test_score/nq", 200, 0.2)]


def test_a_missing_backend_is_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec  # wandb looks absent, also where the loggers extra is installed
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name, *a))
    with pytest.raises(ConfigError, match="pip install wandb"):
        make_loggers(["wandb"], log_dir=tmp_path)
    result = CliRunner().invoke(app, ["watch", str(tmp_path / "endpoints.txt"), "--release", str(tmp_path),
                                      "--logger", "wandb", "--once"])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigError)
    assert not (tmp_path / "history.jsonl").exists()


def test_unknown_logger_names_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="wandb, tensorboard"):
        make_loggers(["mlflow"], log_dir=tmp_path)
