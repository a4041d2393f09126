"""OpenAI-compatible LLM endpoints (vLLM, SGLang, TGI, Ollama, …) on aiohttp + orjson.

Why not the ``openai`` SDK: on these machines it costs 1.4–4.3 ms of client CPU per
call and tops out far below the latency bound at high concurrency; a thin
aiohttp client with orjson costs about 0.1 ms (docs/design/conventions.md, performance facts).

What the client guarantees:

* bounded concurrency (one semaphore around every HTTP attempt);
* a per-attempt timeout and a total deadline per logical call (all retries included);
* retries only on transient failures — HTTP 408/409/429 (honouring ``Retry-After``)
  and 5xx, connection errors, timeouts — with full-jitter exponential backoff and a
  retry cap;
* everything else raises :class:`~aethersearch.errors.EndpointError`, which the
  runner records as an ``endpoint_error`` outcome (never a crash of the run);
* decoding settings are sent explicitly on every call (see :class:`Decoding`).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

import aiohttp
import orjson

from aethersearch.agents.served import LLAMA_CPP, ServedModel, ServerFacts, completion_stop_type
from aethersearch.errors import ConfigError, EndpointError
from aethersearch.records import Decoding, LLMCall, RunLimits

__all__ = ["Completion", "ConstrainedDecoding", "LLM", "OpenAIClient", "RESPONSE_FORMS", "TOKEN_ROUTES",
    "TRANSIENT_STATUS", "TokenCompletion", "decoding_body", "response_format"]

TRANSIENT_STATUS = frozenset({408, 409, 429})
P = TypeVar("P")
R = TypeVar("R")
#: A client built outside a run (probes, notebooks) waits and retries like a run with default limits.
_LIMITS = RunLimits()


class Completion(NamedTuple):
    """One model reply: text, why it stopped, token usage, raw tool calls and timing."""

    text: str
    finish_reason: str | None
    stop_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    tool_calls: list[dict[str, Any]]
    elapsed_s: float
    attempts: int

    def to_record(self, completion_tokens: int | None = None) -> LLMCall:
        """The trace record of this call (``completion_tokens`` overrides the server's count).

        Why the override: a turn continued past a restored stop counts the tokens
        of every reply; building the record once with it avoids a second copy per call.
        Not validated again (:meth:`Record.trusted`): a Completion's fields are typed
        where the reply is read (:meth:`OpenAIClient._post` refuses a reply whose
        fields are not).
        """
        tokens = self.completion_tokens if completion_tokens is None else completion_tokens
        return LLMCall.trusted(text=self.text, prompt_tokens=self.prompt_tokens, completion_tokens=tokens,
                               finish_reason=self.finish_reason, elapsed_s=round(self.elapsed_s, 6),
                               tool_calls_raw=list(self.tool_calls))


class TokenCompletion(NamedTuple):
    """A completion of a token-id context: the reply, the generated ids, whether it ended at end-of-sequence.

    ``token_ids`` excludes the end-of-sequence id; the caller puts it back into its
    context when ``ended_eos``: ``end_id`` when the server named the id that ended
    the generation (SGLang's ``matched``, the last of vLLM's ``token_ids``), else the
    EOS id the route was probed with (llama-server returns no end id).
    """

    completion: Completion
    token_ids: tuple[int, ...]
    ended_eos: bool
    end_id: int | None = None


#: Token-id routes :meth:`OpenAIClient.complete_ids` speaks: llama-server's native ``/completion``,
#: SGLang's native ``/generate`` and vLLM's ``/v1/completions`` with ``return_token_ids``.
TOKEN_ROUTES = ("/completion", "/generate", "/v1/completions")
_SGLANG_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
                  "frequency_penalty")


def _ids(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(type(t) is int for t in value):
        raise TypeError(f"{what} is not a list of ids")
    return value


def _split_end(ids: list[int], ended: bool, end_id: int | None) -> tuple[tuple[int, ...], int | None]:
    """The generated ids without the one that ended them (when the server returned it), and that id."""
    if ended and ids and end_id is not None and ids[-1] == end_id:
        return tuple(ids[:-1]), end_id
    return tuple(ids), end_id


class LLM(Protocol):
    """What agents call: text completion (base models, stop strings) and chat (tool calls).

    ``complete`` and ``chat`` are required. The optional abilities an agent or the
    run may use are declared here with their defaults, so a client says what it can
    do by overriding them (subclass ``LLM`` to inherit the defaults), never by which
    attributes it happens to have: ``served`` (the server's own template and
    tokenizer routes), ``supports_token_ids``/``complete_ids`` (continue a token-id
    context), ``served_model`` (what the endpoint serves, for ``run.json``),
    ``sent_decoding`` (the fields put on the wire) and ``aclose``.
    """

    #: the model server's chat template and tokenizer (None: nothing to ask, e.g. an in-process engine)
    served: ServedModel | None = None

    #: the base URL (None for an in-process engine)
    endpoint: str | None
    #: the model name sent with every request
    model: str | None

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        """``/v1/completions``: continue ``prompt``; generation stops at ``decoding.stop``."""
        ...

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """``/v1/chat/completions`` with optional function-calling ``tools``."""
        ...

    @property
    def supports_token_ids(self) -> bool:
        """Whether :meth:`complete_ids` can continue a token-id context (default: no)."""
        return False

    async def complete_ids(self, ids: Sequence[int], decoding: Decoding, *, route: str = "/completion",
                           eos_token_id: int | None = None) -> TokenCompletion:
        """Continue a context given as token ids (see :meth:`OpenAIClient.complete_ids`); default: refused."""
        raise ConfigError(f"the model client {type(self).__name__} cannot send token-id prompts",
                          fix="check supports_token_ids first and continue by text")

    async def served_model(self) -> dict[str, Any] | None:
        """What the endpoint serves, recorded in ``run.json`` (default: the model name, when there is one)."""
        return {"id": self.model} if self.model else None

    def sent_decoding(self, decoding: Decoding) -> dict[str, Any] | None:
        """The decoding fields put in every request for ``decoding`` (default: None, not known)."""
        return None

    async def aclose(self) -> None:
        """Release the client's connections (default: nothing to release)."""
        return None


#: How a JSON-schema constraint is sent (``response_format``); no one form is accepted everywhere:
#: ``json_schema`` is OpenAI's ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``
#: (vLLM, SGLang, llama.cpp's ``llama-server``, OpenAI); ``json_object`` is
#: ``{"type": "json_object", "schema": ...}``, the only form llama-cpp-python's server takes
#: (0.3.x: it answers ``json_schema`` with HTTP 500) and one llama-server takes too, while vLLM
#: reads ``json_object`` as "any JSON" and would drop the schema.
RESPONSE_FORMS = ("json_schema", "json_object")


class ConstrainedDecoding(Decoding):
    """Decoding of one call whose reply is constrained to a JSON schema (structured output).

    Why a per-call subclass and not a run setting: the schema differs from call to
    call (an agent's action schema lists the evidence ids it may cite right now), so
    only the agent can build it; the agent option that turns it on is in the agent's
    config (and so in ``run.json``). ``model_copy`` keeps the subclass, so the
    budget's ``max_tokens`` clamp keeps the constraint.
    """

    response_format: dict[str, Any]


def response_format(form: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` request field constraining a reply to ``schema``, in ``form`` (see RESPONSE_FORMS)."""
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    raise ConfigError(f"unknown structured-output form {form!r}",
                      fix=f"use one of {', '.join(RESPONSE_FORMS)} (json_object for llama-cpp-python)")


def decoding_body(decoding: Decoding, flavor: str | None = None) -> dict[str, Any]:
    """The request fields for ``decoding``: every sampling knob explicit (seed and stop only when set).

    Both spellings of the repetition penalty are sent (``repetition_penalty`` for vLLM,
    SGLang and TGI, ``repeat_penalty`` for llama.cpp; each server ignores the other's).
    ``top_k`` off (-1) goes out as 0 to llama.cpp servers (``flavor`` ``"llama.cpp"``),
    which refuse negatives and read 0 as off; vLLM and SGLang read -1 as off. A
    :class:`ConstrainedDecoding` adds its ``response_format``.
    """
    top_k = decoding.top_k
    if flavor == LLAMA_CPP and top_k < 0:
        top_k = 0
    body: dict[str, Any] = {"temperature": decoding.temperature, "top_p": decoding.top_p, "top_k": top_k,
                            "min_p": decoding.min_p, "repetition_penalty": decoding.repetition_penalty,
                            "repeat_penalty": decoding.repetition_penalty,
                            "presence_penalty": decoding.presence_penalty,
                            "frequency_penalty": decoding.frequency_penalty,
                            "max_tokens": decoding.max_tokens}
    if decoding.seed is not None:
        body["seed"] = decoding.seed
    if decoding.stop:
        body["stop"] = list(decoding.stop)
    if isinstance(decoding, ConstrainedDecoding):
        body["response_format"] = decoding.response_format
    return body


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIClient(LLM):
    """Async client for one OpenAI-compatible server and model.

    Use as ``async with OpenAIClient(url, model) as llm: await llm.complete(...)``,
    or call :meth:`aclose` yourself. The aiohttp session is created lazily inside
    the running event loop.
    """

    served: ServedModel

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        concurrency: int = 64,
        call_timeout_s: float = _LIMITS.call_timeout_s,
        deadline_s: float = _LIMITS.question_deadline_s or 300.0,
        max_retries: int = _LIMITS.max_retries,
        backoff_base_s: float = 0.25,
        backoff_cap_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        seed: int | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.base_url = base if base.endswith("/v1") else base + "/v1"
        self.endpoint = self.base_url
        self.model = model
        self.concurrency = concurrency
        self.call_timeout_s = call_timeout_s
        self.deadline_s = deadline_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_retry_after_s = max_retry_after_s
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._rng = random.Random(seed)
        #: the server's chat template and tokenizer, asked once (see :mod:`aethersearch.agents.served`)
        self.served = ServedModel(self)
        self._session: aiohttp.ClientSession | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._call_timeout = aiohttp.ClientTimeout(total=call_timeout_s)  # immutable: one for every call
        self._fields: dict[int, tuple[Decoding, str, dict[str, Any]]] = {}
        self.calls = 0
        self.retries = 0

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP session (safe to call twice)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def session(self) -> aiohttp.ClientSession:
        """The client's HTTP session, made in the running event loop on first use (and again after a close);
        the server-facts queries (:class:`ServedModel`) share it."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=self.concurrency)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._session

    def complete(self, prompt: str, decoding: Decoding) -> Coroutine[Any, Any, Completion]:
        """Text completion; the stop string itself is not part of ``text`` (OpenAI semantics).

        Awaited like a coroutine function (it returns the request's coroutine): with
        the decoding's fields cached, no coroutine of its own sits between the caller
        and the HTTP request, so every resume of a model call crosses one layer less.
        """
        fields = self._cached_fields(decoding)
        if fields is not None:
            return self._post("/completions", {"model": self.model, "prompt": prompt, **fields}, _completion_choice)
        return self._complete_uncached(prompt, decoding)

    async def _complete_uncached(self, prompt: str, decoding: Decoding) -> Completion:
        """:meth:`complete` for a decoding whose fields are not cached yet (asks the server's flavor once)."""
        fields = await self._decoding_fields(decoding)
        return await self._post("/completions", {"model": self.model, "prompt": prompt, **fields}, _completion_choice)

    async def complete_ids(self, ids: Sequence[int], decoding: Decoding, *, route: str = "/completion",
                           eos_token_id: int | None = None) -> TokenCompletion:
        """Continue a context given as token ids on a route that returns the generated ids (no stop strings).

        Why these routes: only they take a token-id prompt *and* return the generated
        ids, so a loop can keep its context in ids and put the end-of-sequence id
        back as AetherSearch's loop does. ``route`` is what
        :meth:`ServedModel.token_route` found: llama-server's ``/completion``
        (``content``, ``tokens`` without the EOS, ``stop_type``), SGLang's
        ``/generate`` (``input_ids`` in; ``text``, ``output_ids``,
        ``meta_info.finish_reason`` with the ``matched`` id out) or vLLM's
        ``/v1/completions`` with ``return_token_ids`` (``choices[0].token_ids``;
        ``finish_reason`` ``stop`` with no ``stop_reason`` is the EOS).
        ``eos_token_id`` is the probed EOS id, the end id when a server names none.
        Retries, deadlines and refusals are :meth:`complete`'s; a 200 without those
        fields is a malformed reply.
        """
        fields = self._cached_fields(decoding) or await self._decoding_fields(decoding)
        generated: list[tuple[tuple[int, ...], int | None]] = []
        if route == "/generate":
            return await self._generate_ids(ids, fields, eos_token_id)
        if route == "/v1/completions":
            return await self._vllm_ids(ids, fields, eos_token_id)
        if route != "/completion":
            raise ConfigError(f"unknown token-id route {route!r}", fix=f"use one of: {', '.join(TOKEN_ROUTES)}")
        n_predict = fields["max_tokens"] if fields["max_tokens"] is not None else -1  # llama-server: -1 = no cap
        body: dict[str, Any] = {"prompt": list(ids), "n_predict": n_predict, "return_tokens": True,
                                "cache_prompt": True, **{key: fields[key] for key in _NATIVE_FIELDS}}
        if "seed" in fields:
            body["seed"] = fields["seed"]

        def parse(data: Any) -> _Choice:
            content, tokens, stop_type = data["content"], data["tokens"], completion_stop_type(data)
            if not isinstance(content, str) or stop_type is None:
                raise TypeError("no content string or stop_type")
            generated.append((tuple(_ids(tokens, "tokens")), eos_token_id))
            # the usage Completion reads, in OpenAI's names
            data["usage"] = {"prompt_tokens": data.get("tokens_evaluated") or len(ids),
                             "completion_tokens": data.get("tokens_predicted") or len(tokens)}
            return {"finish_reason": "length" if stop_type == "limit" else "stop", "stop_type": stop_type}, content, []

        completion = await self._post("/completion", body, parse, root=True)
        return TokenCompletion(completion, generated[-1][0], completion.finish_reason == "stop", generated[-1][1])

    async def _generate_ids(self, ids: Sequence[int], fields: dict[str, Any],
                            eos_token_id: int | None) -> TokenCompletion:
        """SGLang's native ``POST /generate``: ``input_ids`` in, ``output_ids`` and the ``matched`` end id out."""
        params: dict[str, Any] = {key: fields[key] for key in _SGLANG_FIELDS}
        params["max_new_tokens"] = fields["max_tokens"]
        if "seed" in fields:
            params["sampling_seed"] = fields["seed"]
        body = {"input_ids": list(ids), "sampling_params": params}
        generated: list[tuple[tuple[int, ...], int | None]] = []

        def parse(data: Any) -> _Choice:
            text, meta = data["text"], data["meta_info"]
            finish = meta["finish_reason"]
            if not isinstance(text, str) or not isinstance(finish, dict) or finish.get("type") not in ("stop",
                                                                                                      "length"):
                raise TypeError("no text string or meta_info.finish_reason type")
            output = _ids(data["output_ids"], "output_ids")
            matched = finish.get("matched")
            ended = finish["type"] == "stop" and (type(matched) is int or matched is None)
            end_id = matched if type(matched) is int else eos_token_id
            generated.append(_split_end(output, ended, end_id))
            data["usage"] = {"prompt_tokens": meta.get("prompt_tokens") or len(ids),
                             "completion_tokens": meta.get("completion_tokens") or len(output)}
            return {"finish_reason": "stop" if ended else "length", "stop_type": "eos" if ended else "limit"}, text, []

        completion = await self._post("/generate", body, parse, root=True)
        return TokenCompletion(completion, generated[-1][0], completion.finish_reason == "stop", generated[-1][1])

    async def _vllm_ids(self, ids: Sequence[int], fields: dict[str, Any],
                        eos_token_id: int | None) -> TokenCompletion:
        """vLLM's ``/v1/completions`` with a token-id ``prompt`` and ``return_token_ids``."""
        body: dict[str, Any] = {"model": self.model, "prompt": list(ids), "return_token_ids": True,
                                **{key: value for key, value in fields.items() if key != "stop"}}
        generated: list[tuple[tuple[int, ...], int | None]] = []

        def parse(data: Any) -> _Choice:
            choice = data["choices"][0]
            text = choice.get("text")
            if not isinstance(text, str) or choice.get("finish_reason") not in ("stop", "length"):
                raise TypeError("no text string or finish_reason")
            output = _ids(choice.get("token_ids"), "choices[0].token_ids")
            stop_reason = choice.get("stop_reason")
            ended = choice["finish_reason"] == "stop" and (stop_reason is None or type(stop_reason) is int)
            end_id = stop_reason if type(stop_reason) is int else eos_token_id
            generated.append(_split_end(output, ended, end_id))
            return {"finish_reason": choice["finish_reason"], "stop_reason": stop_reason}, text, []

        completion = await self._post("/completions", body, parse)
        return TokenCompletion(completion, generated[-1][0], completion.finish_reason == "stop", generated[-1][1])

    async def chat(self, messages: list[dict[str, Any]], decoding: Decoding,
                   tools: list[dict[str, Any]] | None = None) -> Completion:
        """Chat completion; ``tool_calls`` are returned raw (agents validate them)."""
        fields = self._cached_fields(decoding) or await self._decoding_fields(decoding)
        body: dict[str, Any] = {"model": self.model, "messages": messages, **fields}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return await self._post("/chat/completions", body, _chat_choice)

    @property
    def supports_token_ids(self) -> bool:
        """Yes: :meth:`complete_ids` speaks every route in :data:`TOKEN_ROUTES`."""
        return True

    async def server_facts(self) -> ServerFacts:
        """What the server says about its model (chat template, tokenizer routes); asked once."""
        return await self.served.facts()

    def sent_decoding(self, decoding: Decoding) -> dict[str, Any]:
        """The decoding fields this client puts in every request body for ``decoding``.

        Why an accessor: ``run.json`` records what was actually sent, not what was
        asked for, so a knob the client adds (or a server default it overrides)
        is visible beside the scores. Whatever :func:`decoding_body` sends is what
        this returns; the two cannot drift. Exact once the server has been asked
        (:meth:`server_facts`, which :meth:`served_model` does), since llama.cpp
        servers get ``top_k`` 0 for "off" where others get -1.
        """
        facts = self.served.known_facts
        return decoding_body(decoding, facts.flavor if facts else None)

    def _cached_fields(self, decoding: Decoding) -> dict[str, Any] | None:
        """The cached fields of ``decoding`` when the server's flavor is known (no await on the hot path)."""
        facts = self.served.known_facts
        cached = self._fields.get(id(decoding))
        if facts is not None and cached is not None and cached[0] is decoding and cached[1] == facts.flavor:
            return cached[2]
        return None

    async def _decoding_fields(self, decoding: Decoding) -> dict[str, Any]:
        """The decoding fields of a request; built once per decoding object (a run reuses one).

        The cache holds the decoding itself, so an id is never matched to a new object;
        the fields are spread into a fresh body per call, never mutated.
        """
        facts = self.served.known_facts or await self.served.facts()
        cached = self._fields.get(id(decoding))
        if cached is not None and cached[0] is decoding and cached[1] == facts.flavor:
            return cached[2]
        fields = decoding_body(decoding, facts.flavor)
        if len(self._fields) >= 64:
            self._fields.clear()
        self._fields[id(decoding)] = (decoding, facts.flavor, fields)
        return fields

    async def served_model(self) -> dict[str, Any] | None:
        """What ``GET /v1/models`` reports for this client's model, plus ``server`` (recorded in run.json).

        ``server`` is :class:`~aethersearch.agents.served.ServerFacts`: whether the
        model has a chat template (and its sha256), the tokenize routes, the context.

        Returns the listed entry whose id is ``model`` (or the only entry, as
        llama.cpp lists one name whatever is asked), reduced to the fields that
        identify weights (``id``, ``root``, ``parent``, ``max_model_len``,
        ``owned_by``); None when the server has no such route. An unreachable
        server raises :class:`EndpointError` after the usual retries, so a dead
        endpoint fails the run before any question is attempted; several models
        none of which is ``model`` is a :class:`ConfigError`, as every call
        would be refused.
        """
        session = self.session()
        url = self.base_url + "/models"
        attempt = 0
        while True:
            attempt += 1
            timeout = aiohttp.ClientTimeout(total=self.call_timeout_s)
            try:
                async with session.get(url, timeout=timeout) as resp:
                    status, raw = resp.status, await resp.read()
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                failure = EndpointError(f"{url}: connection failed after {attempt} attempt(s): "
                                        f"{type(exc).__name__}: {exc}", transient=True, kind="connection")
            except TimeoutError:
                failure = EndpointError(f"{url}: no reply within {self.call_timeout_s:g}s (attempt {attempt})",
                                        transient=True, kind="timeout")
            else:
                if status in (401, 403):
                    raise EndpointError(f"{url}: HTTP {status}: the server refused the credentials",
                                        status=status, kind="auth",
                                        fix="pass the server's key with --api-key (or AETHER_API_KEY)")
                # what the server says about the model's chat template and tokenizer rides along
                facts = {"server": (await self.server_facts()).model_dump(mode="json")}
                if status != 200:
                    return facts  # no /models route (some proxies)
                try:
                    listed = [m for m in orjson.loads(raw).get("data") or [] if isinstance(m, dict)]
                except (orjson.JSONDecodeError, AttributeError):
                    return facts
                return {**(_pick_model(listed, self.model, url) or {}), **facts}
            if attempt > self.max_retries:
                raise EndpointError(f"{failure.message} — the model endpoint is unreachable; "
                                    f"gave up after {self.max_retries} retries", transient=True, kind=failure.kind,
                                    fix=f"start the model server or correct --endpoint (tried {self.base_url})")
            self.retries += 1
            await asyncio.sleep(self._backoff(attempt - 1, None))

    @staticmethod
    def _completion(data: dict[str, Any], parsed: _Choice, elapsed: float, attempts: int) -> Completion:
        choice, text, tool_calls = parsed
        usage = data.get("usage") or {}
        stop_reason = choice.get("stop_reason")
        # positional: a NamedTuple built from keywords costs a keyword parse per model call
        return Completion(text, choice.get("finish_reason"), stop_reason if isinstance(stop_reason, str) else None,
                          int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                          tool_calls, elapsed, attempts)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        jitter = self._rng.uniform(0.0, min(self.backoff_cap_s, self.backoff_base_s * 2 ** attempt))
        if retry_after is not None:
            return min(self.max_retry_after_s, retry_after + 0.1 * jitter)
        return jitter

    def _post(self, path: str, body: dict[str, Any], parse: Callable[[Any], _Choice], *,
              root: bool = False) -> Coroutine[Any, Any, Completion]:
        """POST a model call with retries on transient failures; returns the reply as a :class:`Completion`.

        ``parse`` pulls the choice out of a 200 reply. Returned un-awaited (as
        :meth:`complete` is), so a model call crosses no extra coroutine layer.
        """
        return self._request(path, body, parse, self._completion, root=root, counted=True)

    async def post_route(self, path: str, body: dict[str, Any], parse: Callable[[Any], P]) -> P:
        """POST to one of the server's own routes (``/tokenize``, ``/detokenize``) under a model call's policy.

        Why a model call's timeout, retries and deadline, not a probe's: on a
        server that answers one request at a time (llama-cpp-python), a tokenizer
        call waits behind the generations in flight, so a short probe timeout
        turns a busy server into an errored question. ``parse`` returns the
        value wanted from a 200 reply, raising ``TypeError``/``KeyError`` when the
        reply lacks it (retried as malformed). Not counted in :attr:`calls`
        (model calls only).
        """
        return await self._request(path, body, parse, _parsed, root=True, counted=False)

    async def _request(self, path: str, body: dict[str, Any], parse: Callable[[Any], P],
                       build: Callable[[Any, P, float, int], R], *, root: bool, counted: bool) -> R:
        """The one retry loop: POST ``body`` until a 200 reply that ``parse`` accepts, then ``build`` the result.

        A 200 whose body is not JSON or that ``parse`` rejects (no ``choices``) is
        retried like a 5xx, because real servers produce them transiently (a
        proxy's truncated body, an overloaded worker's empty reply). A 4xx other
        than 408/409/429 is the server refusing this exact request: raised at once
        with its kind (``context_length``, ``invalid_request``, ``auth``,
        ``not_found``). ``root`` puts ``path`` under the server's root instead of
        ``…/v1``; ``build(data, parsed, elapsed_s, attempts)`` runs outside the
        retry (a field it cannot read is a bug to surface, not a reply to retry).
        """
        session = self._session
        if session is None or session.closed:
            session = self.session()
        assert self._semaphore is not None
        url = (self.served.root if root else self.base_url) + path
        payload = orjson.dumps(body)
        start = time.monotonic()
        deadline = start + self.deadline_s
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - time.monotonic() if attempt > 1 else self.deadline_s
            if remaining <= 0:
                raise EndpointError(f"{url}: total deadline of {self.deadline_s:g}s passed after "
                                    f"{attempt - 1} attempt(s)", transient=True, kind="timeout",
                                    fix="raise --call-timeout/--question-deadline or check the server's health")
            timeout = (self._call_timeout if remaining >= self.call_timeout_s
                       else aiohttp.ClientTimeout(total=remaining))
            retry_after: float | None = None
            try:
                async with self._semaphore:
                    if counted:
                        self.calls += 1
                    async with session.post(url, data=payload, timeout=timeout) as resp:
                        raw = await resp.read()
                        status = resp.status
                        if status != 200:  # only a refusal's pause matters
                            retry_after = _retry_after(resp.headers.get("Retry-After"))
                if status == 200:
                    try:
                        data = orjson.loads(raw)
                        parsed = parse(data)
                    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
                        failure = EndpointError(f"{url}: HTTP 200 whose body is not an OpenAI reply (not JSON, "
                                                f"or no choices) after {attempt} attempt(s): "
                                                f"{raw[:200].decode('utf-8', 'replace')!r}",
                                                status=200, transient=True, kind="malformed_reply")
                    else:  # outside the except: a usage field it cannot read is not a malformed reply to retry
                        return build(data, parsed, time.monotonic() - start, attempt)
                else:
                    detail = raw[:300].decode("utf-8", "replace")
                    if status not in TRANSIENT_STATUS and status < 500:
                        raise _refusal(url, status, detail)
                    failure = EndpointError(f"{url}: HTTP {status} after {attempt} attempt(s): {detail}",
                                            status=status, transient=True,
                                            kind="rate_limited" if status == 429 else "server_error")
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                failure = EndpointError(f"{url}: connection failed after {attempt} attempt(s): "
                                        f"{type(exc).__name__}: {exc}", transient=True, kind="connection")
            except TimeoutError:
                failure = EndpointError(f"{url}: no reply within {timeout.total:g}s "
                                        f"(attempt {attempt})", transient=True, kind="timeout")
            if attempt > self.max_retries:
                raise EndpointError(f"{failure.message} — giving up after {self.max_retries} retries",
                                    status=failure.status, transient=True, kind=failure.kind,
                                    fix="check the server; rerun the same command to retry errored ids")
            pause = self._backoff(attempt - 1, retry_after)
            if time.monotonic() + pause >= deadline:
                raise EndpointError(f"{failure.message} — next retry would pass the "
                                    f"{self.deadline_s:g}s deadline", status=failure.status,
                                    transient=True, kind=failure.kind,
                                    fix="raise the deadline or check the server")
            self.retries += 1
            await asyncio.sleep(pause)


_Choice = tuple[dict[str, Any], str, list[dict[str, Any]]]


def _parsed(data: Any, parsed: P, elapsed: float, attempts: int) -> P:
    """:meth:`OpenAIClient.post_route`'s result: what ``parse`` took from the reply."""
    return parsed
#: decoding fields llama-server's ``/completion`` reads under the names :func:`decoding_body` gives them
_NATIVE_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "presence_penalty",
                  "frequency_penalty")

#: Phrases servers use when a prompt does not fit (vLLM, SGLang, llama.cpp, TGI, OpenAI).
_CONTEXT_PHRASES = ("maximum context length", "context length", "context_length", "exceeds the available context",
                    "exceed_context_size", "context window", "too many tokens", "prompt is too long",
                    "input validation error: `inputs` tokens")


def _completion_choice(data: Any) -> _Choice:
    choice = data["choices"][0]
    text = choice.get("text") or ""
    if not isinstance(text, str):
        raise TypeError("choices[0].text is not a string")
    _check_finish_reason(choice)
    return choice, text, []


def _chat_choice(data: Any) -> _Choice:
    choice = data["choices"][0]
    message = choice["message"]
    text = message.get("content") or ""
    if not isinstance(text, str):
        raise TypeError("choices[0].message.content is not a string")
    _check_finish_reason(choice)
    tool_calls = list(message.get("tool_calls") or [])
    if not all(isinstance(call, dict) for call in tool_calls):
        raise TypeError("choices[0].message.tool_calls holds a non-object")
    return choice, text, tool_calls


def _check_finish_reason(choice: dict[str, Any]) -> None:
    """A reply's ``finish_reason`` is a string or absent (the trace records it unvalidated: ``to_record``)."""
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise TypeError("choices[0].finish_reason is not a string")


def _refusal(url: str, status: int, detail: str) -> EndpointError:
    """The typed error for a 4xx refusal: which kind, whether a rerun can help, and the fix."""
    if status in (401, 403):
        return EndpointError(f"{url}: HTTP {status}: {detail}", status=status, kind="auth",
                             fix="pass the server's key with --api-key (or AETHER_API_KEY); this error is "
                                 "not retried call by call, a rerun retries the question")
    if status == 404:
        return EndpointError(f"{url}: HTTP 404: {detail}", status=status, kind="not_found",
                             fix="check --endpoint (the base URL ending in /v1) and --model (a name the "
                                 "server lists at /v1/models); this error is not retried call by call")
    lowered = detail.lower()
    if any(phrase in lowered for phrase in _CONTEXT_PHRASES):
        return EndpointError(f"{url}: HTTP {status}: the prompt exceeds the model's context: {detail}",
                             status=status, kind="context_length",
                             fix="deterministic (not retried on resume): lower --max-tokens, the "
                                 "observation length or --max-turns, or serve the model with a longer context")
    return EndpointError(f"{url}: HTTP {status}: the server refused the request: {detail}", status=status,
                         kind="invalid_request",
                         fix="deterministic (not retried on resume): fix the request fields the message "
                             "names (decoding parameters, tools), then run into a new --out")


def _pick_model(listed: list[dict[str, Any]], model: str | None, url: str) -> dict[str, Any] | None:
    keep = ("id", "root", "parent", "max_model_len", "owned_by")
    match = [m for m in listed if m.get("id") == model]
    if not match and len(listed) == 1:
        match = listed
    if not match:
        if not listed:
            return None
        names = ", ".join(repr(m.get("id")) for m in listed[:10])
        raise ConfigError(f"{url} serves {names}, not {model!r}: every call would be refused",
                          fix=f"pass --model with one of: {names}")
    return {key: match[0][key] for key in keep if match[0].get(key) is not None}
