"""A run's error report and the ``--max-error-rate`` rule: failures must never look like scores.

Why this exists: a dead or misconfigured endpoint turns every question into an
``endpoint_error``; scored, that run reads EM 0.0, and a training loop logs it
as a collapse. So after every run the caller asks :func:`error_report` what is
still in error (the latest trace of each question, resumed attempts included)
and :func:`enforce_error_rate` refuses the run — a :class:`RunFailed` carrying
the counts per error kind, how many a rerun will retry, and the fix — when the
errored share exceeds the allowed rate (default 0: any question still in error
after its retries fails the run).

The fix is written per error kind, because the right advice differs: a refused
connection is fixed by starting the server and rerunning the same command
(finished questions are kept); a context-length refusal is deterministic, is
*not* retried on resume, and needs different settings in a new run directory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from aethersearch.errors import ConfigError, RunFailed
from aethersearch.records import (
    ERROR_OUTCOMES,
    RETRIED_OUTCOMES,
    ErrorKind,
    Outcome,
    Trace,
)
from aethersearch.rollout.samples import SampleKey, unit_label

__all__ = ["ErrorReport", "FIXES", "NOT_RUN", "check_rate", "enforce_error_rate", "error_report", "trace_kind"]

#: Kind of a question that has no trace at all (the run stopped before it).
NOT_RUN = "not_run"

_RERUN = "then rerun the same command: errored questions are retried, finished ones are kept"
_NEW_OUT = "not retried on resume (the same request would be refused again): change the settings and run into a new --out"

FIXES: dict[str, str] = {
    ErrorKind.CONNECTION: f"nothing answered at the endpoint: start the server or correct --endpoint, {_RERUN}",
    ErrorKind.TIMEOUT: f"calls got no reply within --call-timeout: check the server's load or raise --call-timeout, {_RERUN}",
    ErrorKind.RATE_LIMITED: f"the server kept answering 429: lower --concurrency, {_RERUN}",
    ErrorKind.SERVER_ERROR: f"the server answered 5xx after every retry: check its log, {_RERUN}",
    ErrorKind.MALFORMED_REPLY: f"the server answered 200 without an OpenAI reply (not JSON or no choices): "
                               f"check that it speaks the OpenAI API, {_RERUN}",
    ErrorKind.AUTH: f"the server refused the credentials: pass --api-key (or AETHER_API_KEY), {_RERUN}",
    ErrorKind.NOT_FOUND: f"HTTP 404: check --endpoint (base URL ending in /v1) and --model (a name listed at "
                         f"/v1/models), {_RERUN}",
    ErrorKind.CONTEXT_LENGTH: f"the prompt exceeded the model's context; {_NEW_OUT} (lower --max-tokens or "
                              "--max-turns, or serve a longer context)",
    ErrorKind.INVALID_REQUEST: f"the server refused the request as invalid; {_NEW_OUT} (fix the fields its message names)",
    ErrorKind.DEADLINE: f"questions passed --question-deadline: check the server or raise the deadline, {_RERUN}",
    ErrorKind.TOOL: f"a tool or agent fault (see `error` in traces.jsonl): fix the tool, {_RERUN}",
    ErrorKind.ENVIRONMENT: f"the tool environment failed to open: check --index / --search-url, {_RERUN}",
    ErrorKind.ENDPOINT: f"an endpoint failure (see `error` in traces.jsonl), {_RERUN}",
    ErrorKind.TOOL_UNREACHABLE: f"the tool's server did not answer: start it (`aether serve` / `aether sandbox "
                                f"serve`) or correct its URL, {_RERUN}",
    ErrorKind.TOOL_WRONG_API: "the tool's URL answers, but not with the API the tool speaks (HTTP 401/403/404/405): "
                              "--search-url takes a retrieval server (`aether serve`, POST /retrieve); this URL may "
                              f"be a sandbox (`aether sandbox serve`): use --sandbox-url, {_RERUN}",
    ErrorKind.TOOL_SERVER_ERROR: f"the tool's server answered 5xx or an unexpected status: check its log, {_RERUN}",
    NOT_RUN: "the run stopped before these questions: rerun the same command to run them",
}


class ErrorReport(NamedTuple):
    """What is still in error in a run: counts per kind, what a rerun retries, one example each."""

    total: int
    errored: int
    retryable: int
    by_kind: dict[str, int]
    examples: dict[str, str]
    stopped: str | None = None

    @property
    def share(self) -> float:
        """Errored questions over all questions (0 for an empty run)."""
        return self.errored / self.total if self.total else 0.0

    def exceeds(self, max_error_rate: float) -> bool:
        """True when the errored share is above ``max_error_rate`` (0: any error at all)."""
        return self.errored > 0 and self.share > max_error_rate

    def lines(self) -> list[str]:
        """One line per error kind: count, whether a rerun retries it, an example."""
        out = []
        for kind, count in sorted(self.by_kind.items(), key=lambda item: (-item[1], item[0])):
            retried = "not retried on resume" if kind in (ErrorKind.CONTEXT_LENGTH, ErrorKind.INVALID_REQUEST) \
                else "retried on rerun"
            example = self.examples.get(kind, "")
            out.append(f"{kind:<16} {count:>6}  ({retried}) e.g. {example}")
        return out

    def fixes(self) -> list[str]:
        """The fix for each kind present, most frequent first."""
        ordered = sorted(self.by_kind.items(), key=lambda item: (-item[1], item[0]))
        return [f"{kind}: {FIXES.get(kind, FIXES[ErrorKind.ENDPOINT])}" for kind, _ in ordered]


def trace_kind(trace: Trace) -> str:
    """The error kind of an errored trace (traces written before kinds existed count by outcome)."""
    if trace.error_kind is not None:
        return trace.error_kind.value
    if trace.outcome is Outcome.TOOL_ERROR:
        return ErrorKind.TOOL.value
    if trace.stop_reason == "deadline":
        return ErrorKind.DEADLINE.value
    if trace.outcome is Outcome.REQUEST_REJECTED:
        return ErrorKind.INVALID_REQUEST.value
    return ErrorKind.ENDPOINT.value


def error_report(latest: Mapping[SampleKey, Trace], keys: Iterable[SampleKey], *,
                 stopped: str | None = None) -> ErrorReport:
    """The error report of the rollouts ``keys`` given each one's latest trace (no trace: ``not_run``).

    A key is (question id, sample): with K samples a question counts K times.
    ``stopped`` says why the run stopped starting questions early, if it did.
    """
    kinds: Counter[str] = Counter()
    examples: dict[str, str] = {}
    total = retryable = 0
    for key in keys:
        total += 1
        trace = latest.get(key)
        if trace is None:
            kind, message = NOT_RUN, "no trace"
            retryable += 1
        elif trace.outcome in ERROR_OUTCOMES:
            kind, message = trace_kind(trace), (trace.error or trace.stop_reason)
            retryable += trace.outcome in RETRIED_OUTCOMES
        else:
            continue
        kinds[kind] += 1
        examples.setdefault(kind, f"{unit_label(key)}: {message.splitlines()[0][:200] if message else ''}")
    return ErrorReport(total=total, errored=sum(kinds.values()), retryable=retryable, by_kind=dict(kinds),
                       examples=examples, stopped=stopped)


def check_rate(max_error_rate: float) -> float:
    """Validate a ``--max-error-rate`` value (a share in [0, 1])."""
    if not 0.0 <= max_error_rate <= 1.0:
        raise ConfigError(f"--max-error-rate must be a share between 0 and 1, got {max_error_rate:g}",
                          fix="pass e.g. --max-error-rate 0.01 to tolerate 1% of questions in error")
    return max_error_rate


def enforce_error_rate(report: ErrorReport, max_error_rate: float, run_dir: str | Path | None) -> None:
    """Raise :class:`RunFailed` (with the summary) when ``report`` exceeds ``max_error_rate``."""
    if not report.exceeds(max_error_rate):
        return
    where = f"run {run_dir}" if run_dir is not None else "run"
    body = "\n    ".join(report.lines() + ([f"({report.stopped})"] if report.stopped else []))
    message = (f"{where}: {report.errored} of {report.total} questions ended in error "
               f"({report.share:.1%} > --max-error-rate {max_error_rate:g}); its scores would be wrong, "
               f"so the run is refused:\n    {body}\n  {report.retryable} of them are retried by rerunning "
               f"the same command; {report.errored - report.retryable} are not (deterministic refusals)")
    raise RunFailed(message, run_dir=run_dir, total=report.total, errored=report.errored, kinds=report.by_kind,
                    retryable=report.retryable, max_error_rate=max_error_rate,
                    fix="\n    ".join(report.fixes()))
