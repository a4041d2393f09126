"""Versioned records written to disk or sent over HTTP.

Every record is a frozen pydantic model. Files carry their schema version in the
artefact that describes them (``manifest.json``, ``run.json``) or in each row
(traces), so a reader can refuse a format it does not understand.

The public row formats are deliberately minimal: ``EvalRow`` is exactly the
release's public schema and ``RolloutQuestion`` is exactly ``{id, question}``;
anything else about a question (supporting facts, paths, evidence pages) lives
in ``DiagnosticsRow``, never in the eval rows.
"""

from __future__ import annotations

import keyword
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Budget", "DEFAULT_CONCURRENCY", "DETERMINISTIC_KINDS", "Decoding", "DiagnosticsRow", "Document",
    "ERROR_OUTCOMES", "ErrorKind", "EvalRow", "InfoboxHop", "LLMCall", "Outcome", "Prediction", "RETRIED_OUTCOMES",
    "Record", "RolloutQuestion", "RunFingerprint", "RunLimits", "SCHEMA_VERSION", "SandboxContract", "SearchHit",
    "SparseRecord", "Step", "ToolCall", "Trace", "Usage"]

SCHEMA_VERSION = 1


_set_attribute = object.__setattr__


class Record(BaseModel):
    """Base: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def trusted(cls, **fields: Any) -> Self:
        """The record of ``fields`` (every field, each already of its declared type), not validated again.

        Why: data is validated where it enters from outside (an HTTP reply, a file
        read back, user settings); the records the rollout hot path builds from
        such values (a model call, a step, a trace) were validated a second time,
        several per model call (issue 16). The instance equals the validated one
        field for field (a test checks each record the hot path builds);
        ``model_construct`` is no cheaper, as it fills defaults and aliases field by
        field. A missing or unknown field is refused, so a trusted record can never
        lack a field on disk.

        Every subclass gets its own ``trusted`` (:func:`_trusted_constructor`) whose
        keyword-only parameters are its fields: Python's own argument binding does the
        field check, and no keyword dict is packed and compared per call (0.6 µs a
        record instead of 1.1-1.2, slower than validating a flat record). This
        generic one is the fallback for a class whose field names are not identifiers.
        """
        if fields.keys() != cls.__pydantic_fields__.keys():
            raise TypeError(f"{cls.__name__}.trusted needs exactly its fields "
                            f"{sorted(cls.__pydantic_fields__)}, got {sorted(fields)}")
        return cls.adopt(fields)

    @classmethod
    def adopt(cls, fields: dict[str, Any]) -> Self:
        """The record whose field dict is ``fields`` itself (taken over, not copied, checked or validated).

        For a dict that already holds exactly this record's fields, each of its declared
        type: a copy of another record's ``__dict__`` with some values replaced (e.g.
        :func:`aethersearch.rollout.store.kept_summary`). Anything else goes through
        :meth:`trusted`, which checks the field names first.
        """
        record = object.__new__(cls)
        _set_attribute(record, "__dict__", fields)
        _set_attribute(record, "__pydantic_fields_set__", set(fields))
        _set_attribute(record, "__pydantic_extra__", None)
        _set_attribute(record, "__pydantic_private__", None)
        return record

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Give each record class its own ``trusted`` (see :meth:`trusted`), once its fields are known."""
        super().__pydantic_init_subclass__(**kwargs)
        names = list(cls.__pydantic_fields__)
        if all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
            type.__setattr__(cls, "trusted", staticmethod(_trusted_constructor(cls, names)))


def _trusted_constructor(cls: type[Record], names: list[str]) -> Any:
    """``cls.trusted``: a function of exactly ``cls``'s fields (keyword-only) building the record unvalidated.

    Generated from the field names (as :mod:`dataclasses` generates ``__init__``):
    the field dict is a literal of the parameters, so a call costs one argument
    binding, which also refuses a missing or unknown field with a ``TypeError``
    that names it.
    """
    fields = ", ".join(f"{name!r}: {name}" for name in names)
    source = (f"def trusted(*, {', '.join(names)}):\n"
              f"    record = _new(cls)\n"
              f"    _set(record, '__dict__', {{{fields}}})\n"
              f"    _set(record, '__pydantic_fields_set__', set(names))\n"
              f"    _set(record, '__pydantic_extra__', None)\n"
              f"    _set(record, '__pydantic_private__', None)\n"
              f"    return record\n") if names else "def trusted():\n    return cls.adopt({})\n"
    namespace: dict[str, Any] = {"_new": object.__new__, "_set": _set_attribute, "cls": cls,
                                 "names": frozenset(names)}
    exec(source, namespace)  # noqa: S102 -- the source is built from the class's own field names
    constructor = namespace["trusted"]
    constructor.__qualname__ = f"{cls.__name__}.trusted"
    constructor.__doc__ = Record.trusted.__doc__
    return constructor


# ----------------------------------------------------------------------------- release rows


class SparseRecord(Record):
    """A record written with exactly the fields it was given, and read back with the same ones.

    Why: some files have variants that differ in which keys are present (a probe
    that did not apply, a failed checkpoint, a row written by an older version); a
    null and an absent key are different bytes, so such a file keeps the keys as
    given (``exclude_unset``) rather than writing every field.
    """

    def line(self) -> dict[str, Any]:
        """The JSON written: the fields given when the record was made (or read)."""
        return self.model_dump(mode="json", exclude_unset=True)


class EvalRow(Record):
    """One row of ``eval.jsonl``: the question, its gold aliases and its provenance."""

    id: str
    question: str
    answers: list[str]
    source_dataset: str
    source_split: str
    source_id: str | None
    source_row_number: int = Field(ge=1)
    source_file: str


class RolloutQuestion(Record):
    """One row of ``rollout_questions.jsonl``: all an agent may ever see of a question."""

    id: str
    question: str


class DiagnosticsRow(Record):
    """One row of ``diagnostics.jsonl``: what scorers and diagnostics may use, agents never.

    * 7-source benchmark: ``supporting_pages``/``supporting_facts`` (HotpotQA,
      2Wiki), ``decomposition`` (MuSiQue), upstream ``question_type``/``level``.
    * hint-free construction: ``path`` (v0..vn page ids), ``hops``,
      ``alternative_paths``, ``evidence`` (the evidence set E) and ``hop_questions``
      (the single-hop sub-question of each hop, used by the Forget probe).
    """

    id: str
    source_dataset: str
    question_type: str | None = None
    level: str | None = None
    supporting_pages: list[str] = Field(default_factory=list)
    supporting_facts: list[tuple[str, int]] = Field(default_factory=list)
    decomposition: list[dict[str, Any]] = Field(default_factory=list)
    path: list[str] = Field(default_factory=list)
    hops: int | None = None
    alternative_paths: list[list[str]] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    hop_questions: list[dict[str, Any]] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)


# ----------------------------------------------------------------------------- corpus


class Document(Record):
    """A passage or page of the corpus. ``links`` are ids of pages this one links to."""

    id: str
    title: str
    text: str
    links: list[str] = Field(default_factory=list)
    url: str | None = None
    source_contents: str | None = Field(
        default=None, description="the corpus row's own `contents`, kept only when it differs from the "
                                  "rebuilt `\"Title\"\\nText` (so servers pass it through byte for byte)")
    source_id: int | None = Field(default=None, description="the corpus row's id when it was a JSON integer")

    @property
    def contents(self) -> str:
        """Search-R1 / FlashRAG ``contents``: the corpus row's own string, else ``"Title"\\nText``."""
        if self.source_contents is not None:
            return self.source_contents
        return f'"{self.title}"\n{self.text}'

    def contents_head(self) -> tuple[str, str]:
        """``contents`` split at its first newline: (first line, the rest), without building it when rebuilt.

        Why: Search-R1 renders every retrieved document from this split, once per
        observation; the rebuilt form's split is known from title and text.
        """
        if self.source_contents is None and "\n" not in self.title:
            return f'"{self.title}"', self.text
        first, _, rest = self.contents.partition("\n")
        return first, rest

    @property
    def wire_id(self) -> str | int:
        """The id as the corpus wrote it (an integer stays an integer on the wire)."""
        return self.source_id if self.source_id is not None else self.id


class InfoboxHop(Record):
    """A typed row of a dump page's infobox whose value links to a page (``corpus/infobox.py``).

    ``target`` is the linked title; ``target_page`` its page id when it is another article of the dump
    (through a redirect too), else ``None`` (a page outside the dump: a typed fact, but no hop of the
    graph). ``statement`` is the row as plain text, the line the page serves (``Spouse: Mileva Marić``);
    ``row`` is the row as written in the dump (``| spouse = [[Mileva Marić]]``). Written beside an imported
    Wikipedia store as ``infobox_rows.jsonl``, one per line, in page order.
    """

    schema_version: int = SCHEMA_VERSION
    page: str
    field: str
    relation: str
    target: str
    target_page: str | None
    row: str
    statement: str


class SearchHit(Record):
    """One retrieved document id with its score."""

    doc_id: str
    score: float


# ----------------------------------------------------------------------------- run contract


class Budget(Record):
    """Tool budget enforced by the runner, outside the agent. ``None`` = unlimited.

    ``max_context_tokens`` caps each model call's context (prompt plus reply,
    the prompt counted by the word-regex tokenizer): WebDetective's agents ran
    with a 32K context (``aether run --preset webdetective``).
    """

    max_tool_calls: int | None = 8
    max_turns: int | None = 4
    max_tokens: int | None = None
    max_context_tokens: int | None = None


class Decoding(Record):
    """Decoding settings sent with every LLM call (explicit and recorded).

    Every sampling knob has an explicit, neutral value that is sent on every call,
    because servers disagree on defaults: llama.cpp-style servers default to
    ``repeat_penalty`` 1.1, ``top_k`` 40 and ``min_p`` 0.05, which turned a 28-token
    greedy reply into 512 tokens in a measured run. ``top_k`` -1 means "off" (sent
    as 0 to llama.cpp servers, which reject negatives). ``max_tokens`` is per model
    call: 500, Search-R1's ``max_response_length``.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    max_tokens: int = 500
    seed: int | None = 0
    stop: list[str] = Field(default_factory=list)


#: Questions in flight at once (``aether run --concurrency``, ``evaluate(concurrency=)``).
DEFAULT_CONCURRENCY = 64


class RunLimits(Record):
    """How long a run waits and how often it retries, and how many errors it tolerates.

    Defaults are sized for a 1,400-question run against one model server: a
    call that gets no reply in 60 s is retried (at most 3 times, with jittered
    backoff); a question is given up after 5 minutes whatever happens, so a
    stalled server cannot hold a question for 10 minutes; and any question
    still in error after that fails the run (``max_error_rate`` 0). A server
    that dies mid-run stops the run after ``stop_after_failures`` endpoint
    failures in a row, instead of failing every remaining question one by one.
    """

    call_timeout_s: float = Field(default=60.0, gt=0)
    question_deadline_s: float | None = Field(default=300.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    max_error_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    #: stop starting questions after this many in a row failed on the endpoint (None: never)
    stop_after_failures: int | None = Field(default=50, ge=1)


class SandboxContract(Record):
    """The masked sandbox a run's episodes were served by (``sandbox.contract``): part of the run's contract.

    ``mask_policy`` names the masking and snippet rules by version; ``tools`` are
    the tools the sandbox offered. A run outside the sandbox records none.
    """

    mask_policy: str
    tools: list[str]


class RunFingerprint(Record):
    """``run.json``: every setting that determines a run's predictions.

    ``CONTRACT_FIELDS`` must be equal for two runs to be compared as checkpoints
    (Base/SFT/DPO/RL); ``model`` and ``endpoint`` are what is allowed to differ.
    The fields after ``software_version`` change results without being part of
    the contract: how many questions ran at once, the limits, what the server
    says it serves (``GET /v1/models``) and the decoding fields actually sent
    with every request (``sent_decoding``, from the endpoint itself).
    """

    schema_version: int = SCHEMA_VERSION
    release_id: str
    release_data_sha256: str
    rollout_sha256: str
    question_count: int
    corpus_hash: str | None
    index_hash: str | None
    environment: Literal["search", "sandbox", "none"] = "search"
    agent: str
    agent_config: dict[str, Any] = Field(default_factory=dict)
    prompt_template_hash: str | None
    budget: Budget
    endpoint: str | None
    model: str | None
    decoding: Decoding
    retrieval_topk: int | None = None
    software_version: str
    concurrency: int | None = None
    limits: RunLimits | None = None
    served_model: dict[str, Any] | None = None
    sent_decoding: dict[str, Any] | None = None
    #: K: rollouts per question (``--samples``); sample k of a question runs with its own derived seed
    samples: int = Field(default=1, ge=1)
    #: the masked sandbox's policy and tools (``environment == "sandbox"``); None outside the sandbox
    sandbox: SandboxContract | None = None
    #: the retrieval server's declared mode aliases (``aether serve --mode-alias``, from its ``/health``)
    retrieval_mode_aliases: dict[str, str] | None = None
    #: the agent profile the run followed (``agents/profiles``): name, sha256, and where the budget came from
    profile: dict[str, Any] | None = None
    #: sha256 of that profile's canonical form: part of the contract, so ``compare`` never mixes profiles
    profile_sha256: str | None = None

    CONTRACT_FIELDS: ClassVar[tuple[str, ...]] = (
        "release_id",
        "release_data_sha256",
        "corpus_hash",
        "index_hash",
        "environment",
        "sandbox",
        "agent",
        "agent_config",
        "prompt_template_hash",
        "budget",
        "decoding",
        "retrieval_topk",
        "samples",
        "profile_sha256",
    )


# ----------------------------------------------------------------------------- traces


class Outcome(StrEnum):
    """How an episode ended. Only ``answered`` carries a prediction to score as right/wrong."""

    ANSWERED = "answered"
    ABSTAINED = "abstained"
    NO_ANSWER_TAG = "no_answer_tag"
    BUDGET = "budget"
    ENDPOINT_ERROR = "endpoint_error"
    TOOL_ERROR = "tool_error"
    #: the final reply hit ``max_tokens`` before closing an ``<answer>`` (never scored as an answer)
    TRUNCATED = "truncated"
    #: the server refused this exact request (context length exceeded, invalid request):
    #: deterministic, so a rerun does not retry it; still an error, never a wrong answer
    REQUEST_REJECTED = "request_rejected"


#: Error outcomes a rerun of the same command retries (the failure may be transient).
RETRIED_OUTCOMES = frozenset({Outcome.ENDPOINT_ERROR, Outcome.TOOL_ERROR})
#: Every error outcome: no prediction was made, so the question must not count as wrong.
ERROR_OUTCOMES = RETRIED_OUTCOMES | {Outcome.REQUEST_REJECTED}


class ErrorKind(StrEnum):
    """Why an errored question failed (``Trace.error_kind``); the run's error summary counts these."""

    CONNECTION = "connection"  # refused, reset, DNS: nothing answered
    TIMEOUT = "timeout"  # a model call got no reply within the per-call timeout
    RATE_LIMITED = "rate_limited"  # HTTP 429 after every retry
    SERVER_ERROR = "server_error"  # HTTP 5xx / 408 / 409 after every retry
    MALFORMED_REPLY = "malformed_reply"  # HTTP 200 whose body is not JSON or has no choices
    AUTH = "auth"  # HTTP 401 / 403
    NOT_FOUND = "not_found"  # HTTP 404: wrong URL path or model name
    CONTEXT_LENGTH = "context_length"  # the prompt no longer fits the model's context (deterministic)
    INVALID_REQUEST = "invalid_request"  # another 4xx refusal of this request (deterministic)
    DEADLINE = "deadline"  # the question passed its per-question deadline
    TOOL = "tool"  # a tool or agent fault
    ENVIRONMENT = "environment"  # the question's tool environment failed to open
    ENDPOINT = "endpoint"  # any other endpoint failure
    TOOL_UNREACHABLE = "tool_unreachable"  # the search/sandbox server: refused connection or timeout, after retries
    TOOL_WRONG_API = "tool_wrong_api"  # the tool's server answered 401/403/404/405: not the API the tool speaks
    TOOL_SERVER_ERROR = "tool_server_error"  # the tool's server answered 5xx or another unexpected status


#: Error kinds the runner records as ``request_rejected`` (never retried on resume).
DETERMINISTIC_KINDS = frozenset({ErrorKind.CONTEXT_LENGTH, ErrorKind.INVALID_REQUEST})


class ToolCall(Record):
    """One tool invocation: what was asked, what came back, what the mask withheld."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    returned_ids: list[str] = Field(default_factory=list)
    suppressed_ids: list[str] = Field(default_factory=list)
    error: str | None = None
    elapsed_s: float = 0.0
    started_at: float | None = None  # Unix time the call began (set by environments that log actions)


class LLMCall(Record):
    """One model call: its output text and token usage."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    elapsed_s: float = 0.0
    tool_calls_raw: list[dict[str, Any]] = Field(default_factory=list)


class Step(Record):
    """One agent turn: an LLM call, the tool calls it made, and the observation fed back.

    ``agent`` names the sub-agent for multi-agent loops (``solver-0``,
    ``extractor``, ``verifier``...); ``notes`` holds agent-specific structure
    (evidence ids, claims, verdicts) so diagnostics can read it.
    """

    index: int
    agent: str = "main"
    llm: LLMCall | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    observation: str | None = None
    notes: dict[str, Any] = Field(default_factory=dict)


class Usage(Record):
    """Totals over an episode."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    turns: int = 0
    tool_calls: int = 0


class Trace(Record):
    """One line of ``traces.jsonl``: a finished episode, complete enough to rescore and diagnose."""

    schema_version: int = SCHEMA_VERSION
    id: str
    question_seen: str
    agent: str
    steps: list[Step] = Field(default_factory=list)
    response: str = ""
    prediction: str | None = None
    outcome: Outcome
    stop_reason: str
    error: str | None = None
    error_kind: ErrorKind | None = None
    usage: Usage = Field(default_factory=Usage)
    elapsed_s: float = 0.0
    attempt: int = 1
    #: which of the run's K samples of this question (0..K-1; 0 for a one-sample run)
    sample: int = Field(default=0, ge=0)


class Prediction(Record):
    """One line of ``predictions.jsonl``: what the scorer joins to gold by (id, sample)."""

    id: str
    prediction: str | None
    outcome: Outcome
    sample: int = Field(default=0, ge=0)
