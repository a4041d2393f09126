"""Strict JSONL I/O, atomic writes, durable appends and hashing.

Why: a benchmark release must be byte-identical across builds, a run directory
must survive ``kill -9`` at any point, and a malformed line must be reported with
its file and line number instead of being skipped.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from aethersearch.errors import DataError

__all__ = [
    "DurableAppender",
    "TolerantRead",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "dumps",
    "dumps_pretty",
    "encode_jsonl",
    "iter_jsonl",
    "loads",
    "read_jsonl",
    "read_jsonl_tolerant",
    "read_records",
    "sha256_bytes",
    "sha256_file",
    "truncate_to",
    "validate_row",
    "write_jsonl",
]

M = TypeVar("M", bound=BaseModel)

_DUMP_OPTIONS = orjson.OPT_SORT_KEYS


def dumps(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, compact, UTF-8, no trailing newline."""
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return orjson.dumps(obj, option=_DUMP_OPTIONS)


def dumps_pretty(obj: Any) -> bytes:
    """Canonical, indented JSON bytes ending in a newline (for manifests people read)."""
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return orjson.dumps(obj, option=_DUMP_OPTIONS | orjson.OPT_INDENT_2) + b"\n"


def loads(data: bytes | str) -> Any:
    """Parse JSON (orjson)."""
    return orjson.loads(data)


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for every non-blank line; malformed JSON is a DataError."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DataError(path, f"cannot open: {exc.strerror}", fix="check the path") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield number, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise DataError(path, f"invalid JSON: {exc}", line=number,
                                fix="each line must be one complete JSON object") from None


def read_jsonl(path: str | Path) -> list[Any]:
    """All values of a JSONL file, strictly parsed."""
    return [value for _, value in iter_jsonl(path)]


def read_records(path: str | Path, model: type[M]) -> list[M]:
    """Parse every line of ``path`` as ``model``; a bad row names its line and field."""
    return [validate_row(path, number, value, model) for number, value in iter_jsonl(path)]


def validate_row(path: str | Path, line: int, value: Any, model: type[M]) -> M:
    """Validate one parsed row as ``model``, turning pydantic errors into a DataError."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise DataError(path, f"{model.__name__}: {first['msg']}", line=line, field=field,
                        fix=f"see the {model.__name__} schema") from None


class TolerantRead(NamedTuple):
    """Rows of an append-only log plus a torn final line, if the writer died mid-append."""

    rows: list[Any]
    torn_tail: bytes | None
    valid_bytes: int


def read_jsonl_tolerant(path: str | Path) -> TolerantRead:
    """Read an append-only JSONL log, setting aside a torn *last* line.

    Only the final line may be incomplete (a crash during append); a bad line
    anywhere else is real corruption and raises DataError.
    """
    path = Path(path)
    if not path.exists():
        return TolerantRead([], None, 0)
    data = path.read_bytes()
    rows: list[Any] = []
    offset = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        is_last = number == len(lines)
        if is_last and raw == b"":
            break
        try:
            if raw.strip():
                rows.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            if is_last or all(not rest.strip() for rest in lines[number:]):
                return TolerantRead(rows, raw, offset)
            raise DataError(path, "corrupt line in the middle of an append-only log",
                            line=number, fix="restore the file or delete the run") from None
        if is_last:
            # A complete JSON value without its newline: the append was torn after the value.
            return TolerantRead(rows[:-1], raw, offset)
        offset += len(raw) + 1
    return TolerantRead(rows, None, offset)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _default_file_mode() -> int:
    """The mode ``open()`` would give a new file (0o666 minus the umask); mkstemp gives 0o600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _default_file_mode()


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory, fsync, then rename.

    A reader never sees a half-written file, and a crash leaves the old file intact.
    The file gets the usual permissions of a new file (not mkstemp's private 0600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Atomically write UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Atomically write canonical, indented JSON."""
    atomic_write_bytes(path, dumps_pretty(obj))


def encode_jsonl(rows: Iterable[Any]) -> bytes:
    """Canonical JSONL bytes: one sorted-key object per line, each ending in a newline."""
    return b"".join(dumps(row) + b"\n" for row in rows)


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> None:
    """Atomically write rows as canonical JSONL."""
    atomic_write_bytes(path, encode_jsonl(rows))


class DurableAppender:
    """Append JSONL rows with flush + fsync after each, so a finished row survives a crash."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("ab")

    def append(self, row: Any) -> None:
        """Write one row and make it durable before returning."""
        self._handle.write(dumps(row) + b"\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the underlying file."""
        self._handle.close()

    def __enter__(self) -> DurableAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def truncate_to(path: str | Path, size: int) -> None:
    """Cut a log back to ``size`` bytes (used to set aside a torn tail on resume)."""
    with Path(path).open("r+b") as handle:
        handle.truncate(size)
        handle.flush()
        os.fsync(handle.fileno())


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, streamed."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    except OSError as exc:
        raise DataError(path, f"cannot read: {exc.strerror}", fix="check the path") from None
    return digest.hexdigest()
