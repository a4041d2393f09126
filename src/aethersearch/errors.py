"""One error tree for the whole toolkit.

Every error says what went wrong, where (file and line, or record id) and how to
fix it, so the CLI can print it as one clean message instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["AetherError", "BudgetExhausted", "ConfigError", "DataError", "EndpointError", "IntegrityError",
    "JudgeErrors", "ReviewRequired", "RunFailed", "RunLocked", "ShortageError", "ToolError", "ToolUnavailable"]


class AetherError(Exception):
    """Base of every error the toolkit raises on purpose."""

    exit_code: int = 2

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message = message
        self.fix = fix
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\n  fix: {self.fix}"


class DataError(AetherError):
    """A malformed input file: names the file, the one-based line/row and the field."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        where = self.path if line is None else f"{self.path}:{line}"
        if field is not None:
            where += f" (field {field!r})"
        super().__init__(f"{where}: {message}", fix=fix)


class IntegrityError(AetherError):
    """A hash, checksum or fingerprint does not match what was recorded."""


class ConfigError(AetherError):
    """A configuration value is missing, unknown or inconsistent."""


class JudgeErrors(AetherError):
    """An LLM judge gave no verdict on some rows (``--judge-errors fail``); the scores were written first."""


class BudgetExhausted(AetherError):
    """The tool budget (calls, turns or tokens) of an episode is spent."""

    def __init__(self, which: str, limit: int, *, fix: str | None = None) -> None:
        self.which = which
        self.limit = limit
        super().__init__(f"tool budget exhausted: {which} limit {limit} reached", fix=fix)


class EndpointError(AetherError):
    """An LLM or search endpoint failed in a way that retrying (now) will not fix.

    ``kind`` is the failure class the runner records on the trace (an
    :class:`~aethersearch.records.ErrorKind` value such as ``connection`` or
    ``context_length``); it decides whether a rerun retries the question.
    """

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False,
                 kind: str | None = None, fix: str | None = None) -> None:
        self.status = status
        self.transient = transient
        self.kind = kind
        super().__init__(message, fix=fix)


class RunFailed(AetherError):
    """A run ended with more questions in error than ``--max-error-rate`` allows.

    Why a typed error and not a low score: an unreachable or misconfigured
    endpoint otherwise yields a run of errors that scores as EM 0.0, which a
    training loop would log as a collapse. The attributes carry the same
    summary the CLI prints: ``errored`` of ``total`` questions, counts per
    error kind, how many of them a rerun will retry, and the fix.
    """

    exit_code = 3

    def __init__(self, message: str, *, run_dir: str | Path | None, total: int, errored: int,
                 kinds: dict[str, int], retryable: int, max_error_rate: float,
                 fix: str | None = None) -> None:
        self.run_dir = None if run_dir is None else str(run_dir)
        self.total = total
        self.errored = errored
        self.kinds = dict(kinds)
        self.retryable = retryable
        self.max_error_rate = max_error_rate
        super().__init__(message, fix=fix)


class RunLocked(AetherError):
    """Another process is writing the run directory (two writers would run questions twice)."""

    def __init__(self, message: str, *, pid: int | None, fix: str | None = None) -> None:
        self.pid = pid
        super().__init__(message, fix=fix)


class ToolError(AetherError):
    """A tool call was malformed or refused (charged to the budget, reported to the agent)."""


class ToolUnavailable(AetherError):
    """A tool could not be used at all: its server was unreachable, answered 5xx, or is not the API the agent needs.

    Why apart from :class:`ToolError`: a refusal under the contract (budget spent,
    a locked page, a query over the length limit) is an answer the agent sees and
    the episode goes on; a failed transport or a wrong server is no answer at all.
    Shown to the model as an empty observation, a run of such failures reads as
    honest abstentions; raised, the runner ends the episode as ``tool_error`` with
    ``kind`` (``records.ErrorKind``: ``tool_unreachable``, ``tool_wrong_api`` or
    ``tool_server_error``) and ``--max-error-rate`` counts it.
    """

    def __init__(self, message: str, *, kind: str, tool: str, status: int | None = None,
                 fix: str | None = None) -> None:
        self.kind = kind
        self.tool = tool
        self.status = status
        super().__init__(message, fix=fix)


class ShortageError(AetherError):
    """A source has fewer eligible candidates than its quota."""


class ReviewRequired(AetherError):
    """Flagged near-duplicate pairs have no recorded review decision."""
