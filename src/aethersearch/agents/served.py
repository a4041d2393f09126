"""What the model server knows that the agents must match: its chat template and its tokenizer.

Why ask the server: Search-R1 applies the policy's chat template whenever the
tokenizer has one, and cuts every observation to 500 tokens *of the policy's
tokenizer* (Qwen2.5's cuts about 44% of real top-3 Wikipedia observations; a word
regex under 1%). The served model is the only source of truth for both, and the
common servers expose them:

==================  ==========================================  =====================================
server              chat template                               tokenizer
==================  ==========================================  =====================================
llama.cpp           ``GET /props`` → ``chat_template``;          ``POST /tokenize`` ``{"content"}``,
``llama-server``    ``POST /apply-template`` renders it          ``POST /detokenize`` → ``content``
vLLM, SGLang        ``POST /tokenize`` with ``messages`` works   ``POST /tokenize`` ``{"prompt"}``,
                    only when the model has a template           ``POST /detokenize`` → ``prompt``
llama-cpp-python    not reported (``scripts/serve_gguf.py``      ``POST /extras/tokenize``
                    adds llama-server's routes)                  ``{"input"}``, ``/extras/detokenize``
==================  ==========================================  =====================================

:class:`ServedModel` probes once per client (cached) and answers with a
:class:`ServerFacts` record, which the run records in ``run.json``; token lists are
cached per text, since the same passages come back for many questions.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Literal, Protocol, TypeVar

import aiohttp
import orjson

from aethersearch.errors import EndpointError
from aethersearch.records import Record

__all__ = ["LLAMA_CPP", "ProbedOnce", "ServedModel", "ServerClient", "ServerFacts", "TokenRoute", "UNKNOWN", "VLLM",
    "completion_stop_type"]

P = TypeVar("P")

T = TypeVar("T")

LLAMA_CPP = "llama.cpp"
VLLM = "vllm"
UNKNOWN = "unknown"
_CACHE_LIMIT = 8192
_PROBE_TIMEOUT_S = 30.0


class ServerFacts(Record):
    """What the server said about its model: recorded in ``run.json`` (it changes predictions).

    ``chat_template`` is True/False when the server answered, None when it cannot say
    (then ``prompt_format=auto`` uses raw text, and says so). ``tokenize`` is the route
    the observation cut uses, None when the server has none.
    """

    flavor: str = UNKNOWN
    chat_template: bool | None = None
    chat_template_sha256: str | None = None
    template_source: str = "not reported"
    tokenize: str | None = None
    detokenize: str | None = None
    n_ctx: int | None = None


class TokenRoute(Record):
    """Whether this server continues a context given as token ids, and why (recorded in ``run.json``).

    ``mode`` ``token_ids``: ``route`` takes a token-id prompt and returns the
    generated ids, and the end-of-sequence token is ``eos_token_id`` (its text
    ``eos_text``, one id that detokenizes back to it). ``text``: one of those was
    not established; ``reason`` names which probe failed and how.
    """

    mode: Literal["token_ids", "text"]
    route: str | None = None
    eos_token_id: int | None = None
    eos_text: str | None = None
    reason: str


class ProbedOnce(Generic[T]):
    """A server fact probed at most once: concurrent callers wait for the one probe in flight, and a kept
    answer is returned from then on without the network. The lock is made lazily, in the running loop."""

    def __init__(self) -> None:
        self.value: T | None = None
        self._lock: asyncio.Lock | None = None

    async def get(self, probe: Callable[[], Awaitable[tuple[T, bool]]]) -> T:
        """The kept value, else ``probe()``'s, kept when its flag says so (False: ask again next time)."""
        if self.value is not None:
            return self.value
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.value is not None:
                return self.value
            value, keep = await probe()
            if keep:
                self.value = value
        return value


class ServerClient(Protocol):
    """What :class:`ServedModel` needs of the client it belongs to (:class:`~aethersearch.agents.llm.OpenAIClient`)."""

    base_url: str
    model: str

    def session(self) -> aiohttp.ClientSession:
        """The client's HTTP session."""
        ...

    async def complete(self, prompt: str, decoding: Any) -> Any:
        """An unbudgeted text completion."""
        ...

    async def post_route(self, path: str, body: dict[str, Any], parse: Callable[[Any], P]) -> P:
        """POST to one of the server's own routes under a model call's timeout and retries."""
        ...


class ServedModel:
    """Queries one OpenAI-compatible server about its model (template, tokenizer), with caches.

    ``client`` is the :class:`~aethersearch.agents.llm.OpenAIClient` it belongs to: its
    aiohttp session (created lazily in the running loop) carries the requests, and its
    ``…/v1`` base URL's parent holds the server's own routes.
    """

    def __init__(self, client: ServerClient) -> None:
        self.client = client
        self._session: Callable[[], aiohttp.ClientSession] = client.session
        self.base_url = str(client.base_url).rstrip("/")
        self.root = self.base_url.removesuffix("/v1")
        self.model: str | None = client.model
        self._facts: ProbedOnce[ServerFacts] = ProbedOnce()
        self._tokens: dict[str, tuple[int, ...]] = {}
        self._prefix: tuple[int, ...] = ()  # what /extras/tokenize prepends (BOS) to every text
        self._token_route: ProbedOnce[TokenRoute] = ProbedOnce()

    async def complete(self, prompt: str, decoding: Any) -> Any:
        """An unbudgeted text completion (stop-string checks and continuations within one turn)."""
        return await self.client.complete(prompt, decoding)

    @property
    def known_facts(self) -> ServerFacts | None:
        """The facts if already probed (no network), else None."""
        return self._facts.value

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """(status, parsed JSON); a connection failure or timeout is status 0 with what happened as the reply
        (probes treat it as absent; reasons quote it)."""
        url = self.root + path
        try:
            timeout = aiohttp.ClientTimeout(total=_PROBE_TIMEOUT_S)
            data = None if body is None else orjson.dumps(body)
            headers = None if body is None else {"Content-Type": "application/json"}
            async with self._session().request(method, url, data=data, headers=headers, timeout=timeout) as resp:
                raw = await resp.read()
                status = resp.status
        except aiohttp.ClientError as exc:
            return 0, f"connection failed: {type(exc).__name__}: {exc}"
        except TimeoutError:
            return 0, f"no reply within {_PROBE_TIMEOUT_S:g}s"
        try:
            return status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return status, raw[:300].decode("utf-8", "replace")

    async def facts(self) -> ServerFacts:
        """Probe the server once (later calls return the cached answer); an unreachable server is asked
        again next time, not cached as "unknown"."""
        return await self._facts.get(self._probe)

    async def _probe(self) -> tuple[ServerFacts, bool]:
        found: dict[str, Any] = {}
        status, props = await self._call("GET", "/props")
        if status == 0:
            return ServerFacts(), False
        if status == 200 and isinstance(props, dict) and "chat_template" in props:
            template = props.get("chat_template") or ""
            settings = props.get("default_generation_settings") or {}
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
            found.update(flavor=LLAMA_CPP, chat_template=bool(template), template_source="GET /props",
                         chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else None,
                         n_ctx=n_ctx if isinstance(n_ctx, int) else props.get("n_ctx"))
        status, reply = await self._call("POST", "/tokenize", {
            "model": self.model, "prompt": "a b", "content": "a b", "add_special_tokens": False,
            "add_special": False})
        if status == 200 and isinstance(reply, dict) and isinstance(reply.get("tokens"), list):
            found.update(tokenize="/tokenize", detokenize="/detokenize")
            if "max_model_len" in reply:  # vLLM (SGLang answers the same shape)
                found.setdefault("flavor", VLLM)
                found.setdefault("n_ctx", reply.get("max_model_len"))
            if "chat_template" not in found:
                found.update(await self._template_by_tokenize())
        else:
            status, reply = await self._call("POST", "/extras/tokenize", {"model": self.model, "input": ""})
            if status == 200 and isinstance(reply, dict) and isinstance(reply.get("tokens"), list):
                self._prefix = tuple(int(t) for t in reply["tokens"])
                found.update(tokenize="/extras/tokenize", detokenize="/extras/detokenize")
                found.setdefault("flavor", LLAMA_CPP)  # llama-cpp-python
        return ServerFacts(**found), True

    async def token_route(self, eos_text: str | None = None) -> TokenRoute:
        """Probe once (cached) whether and where the server continues by token ids.

        Why probed, never assumed from the server's name: a route that takes a
        token-id prompt but loses the generated ids, or an EOS that is not one
        token, would silently change the context. Every condition is checked on
        the server itself: the EOS text (``GET /props``' ``eos_token``, else
        ``eos_text``, the agent's) must be exactly one id that ``/detokenize``
        turns back into that text, and a one-token generation with a token-id
        prompt must return the generated ids on one of, in order: llama-server's
        ``POST /completion`` (``content``, ``tokens``, ``stop_type``), SGLang's
        native ``POST /generate`` (``text``, ``output_ids``,
        ``meta_info.finish_reason``) or vLLM's ``POST /v1/completions`` with
        ``return_token_ids`` (``choices[0].token_ids``). The reason names the route
        found, or why each one failed.
        """
        async def probe() -> tuple[TokenRoute, bool]:
            return await self._probe_token_route(await self.facts(), eos_text), True

        return await self._token_route.get(probe)

    async def _probe_token_route(self, facts: ServerFacts, eos_hint: str | None) -> TokenRoute:
        if facts.tokenize is None:
            return TokenRoute(mode="text", reason="the server has no tokenize route, so no token-id context "
                                                  "can be built")
        status, props = await self._call("GET", "/props")
        eos = props.get("eos_token") if status == 200 and isinstance(props, dict) else None
        source = "GET /props"
        if not isinstance(eos, str) or not eos:
            eos, source = eos_hint, "the agent's eos_text"
        if not isinstance(eos, str) or not eos:
            return TokenRoute(mode="text", reason=f"GET /props (HTTP {status}) names no eos_token and the agent "
                                                  "gave none, so the end-of-sequence id cannot be put back")
        eos_ids = await self.tokenize(eos)
        if len(eos_ids) != 1 or await self.detokenize(eos_ids) != eos:
            return TokenRoute(mode="text", eos_text=eos,
                              reason=f"the EOS text {eos!r} ({source}) is {len(eos_ids)} token(s) that do not "
                                     "detokenize back to it")
        probe_ids = list(await self.tokenize("Hello"))
        failures = []
        for route, request, check in (
                ("/completion", {"prompt": probe_ids, "n_predict": 1, "temperature": 0.0, "return_tokens": True,
                                 "cache_prompt": False}, _llama_ids_reply),
                ("/generate", {"input_ids": probe_ids, "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}},
                 _sglang_ids_reply),
                ("/v1/completions", {"model": self.model, "prompt": probe_ids, "max_tokens": 1, "temperature": 0.0,
                                     "return_token_ids": True}, _vllm_ids_reply)):
            status, reply = await self._call("POST", route, request)
            if status == 200 and check(reply):
                return TokenRoute(mode="token_ids", route=route, eos_token_id=eos_ids[0], eos_text=eos,
                                  reason=f"POST {route} takes token-id prompts and returns the generated ids "
                                         f"(EOS from {source})")
            failures.append(f"POST {route}: HTTP {status} {_reply_gist(reply)}")
        return TokenRoute(mode="text", eos_token_id=eos_ids[0], eos_text=eos,
                          reason="no route took a token-id prompt and returned the generated ids ("
                                 + "; ".join(failures) + ")")

    async def _template_by_tokenize(self) -> dict[str, Any]:
        """vLLM/SGLang: tokenizing ``messages`` succeeds only when the model has a chat template."""
        status, reply = await self._call("POST", "/tokenize", {
            "model": self.model, "messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True,
            "add_special_tokens": False})
        if status == 200 and isinstance(reply, dict) and isinstance(reply.get("tokens"), list) and reply["tokens"]:
            return {"chat_template": True, "template_source": "POST /tokenize messages"}
        if status in (400, 422, 500) and "template" in str(reply).lower():
            return {"chat_template": False, "template_source": "POST /tokenize messages"}
        return {}

    async def tokenize(self, text: str) -> tuple[int, ...]:
        """The served tokenizer's ids for ``text`` (no special tokens added; cached)."""
        cached = self._tokens.get(text)
        if cached is not None:
            return cached
        facts = await self.facts()
        if facts.tokenize is None:
            raise EndpointError(f"{self.root}: the server has no tokenize endpoint, so observations cannot be cut "
                                "with the served model's tokenizer",
                                fix="pass --agent-config tokenizer=hf:<model name or path> (a local copy of the "
                                    "model's tokenizer), or tokenizer=regex to accept an approximate cut")
        if facts.tokenize == "/extras/tokenize":
            body: dict[str, Any] = {"model": self.model, "input": text}
        else:
            body = {"model": self.model, "prompt": text, "content": text, "add_special_tokens": False,
                    "add_special": False}
        ids = tuple(await self.client.post_route(facts.tokenize, body, _tokens_of))
        if self._prefix and ids[:len(self._prefix)] == self._prefix:
            ids = ids[len(self._prefix):]
        if len(self._tokens) >= _CACHE_LIMIT:
            self._tokens.clear()
        self._tokens[text] = ids
        return ids

    async def detokenize(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens kept, as Search-R1 keeps them in its rolling ids)."""
        facts = await self.facts()
        path = facts.detokenize or "/detokenize"
        text: str = await self.client.post_route(path, {"model": self.model, "tokens": list(ids)}, _text_of)
        return text

    def _answered(self, status: int, path: str) -> None:
        """Raise a retryable ``connection`` error when a server that answered the probe no longer answers.

        Why: ``render_chat``'s None means "this server cannot render the template", a configuration fact; a
        server that went away mid-run must be retried on rerun instead, not reported as a missing feature.
        """
        if status == 0:
            raise EndpointError(f"{self.root + path}: connection failed while rendering the chat template",
                                transient=True, kind="connection",
                                fix="check that the model server is still running, then rerun the same command")

    async def render_chat(self, messages: list[dict[str, Any]]) -> str | None:
        """The server's own rendering of ``messages`` with the generation prompt, or None if it cannot."""
        facts = await self.facts()
        if facts.chat_template is False:
            return None
        if facts.flavor == LLAMA_CPP:
            status, reply = await self._call("POST", "/apply-template", {"messages": messages})
            self._answered(status, "/apply-template")
            if status == 200 and isinstance(reply, dict) and isinstance(reply.get("prompt"), str):
                return str(reply["prompt"])
            return None
        if facts.tokenize == "/tokenize":
            status, reply = await self._call("POST", "/tokenize", {
                "model": self.model, "messages": messages, "add_generation_prompt": True,
                "add_special_tokens": False})
            self._answered(status, "/tokenize")
            if status == 200 and isinstance(reply, dict) and isinstance(reply.get("tokens"), list):
                return await self.detokenize([int(t) for t in reply["tokens"]])
        return None


def completion_stop_type(reply: dict[str, Any]) -> Literal["eos", "limit", "word"] | None:
    """Why a llama-server ``/completion`` reply ended: ``stop_type`` (current), else the older ``stopped_*`` flags."""
    stop_type = reply.get("stop_type")
    if stop_type in ("eos", "limit", "word"):
        return stop_type  # type: ignore[no-any-return]
    for flag, kind in (("stopped_eos", "eos"), ("stopped_limit", "limit"), ("stopped_word", "word")):
        if reply.get(flag) is True:
            return kind  # type: ignore[return-value]
    return None


def _tokens_of(reply: Any) -> list[int]:
    """The ids of a tokenize reply (every server names them ``tokens``); TypeError when it has none."""
    tokens = reply["tokens"]
    if not _int_list(tokens):
        raise TypeError("tokens is not a list of ids")
    return list(tokens)


def _text_of(reply: Any) -> str:
    """The text of a detokenize reply: vLLM names it ``prompt``, llama-server ``content``, others ``text``."""
    for key in ("prompt", "content", "text"):
        if isinstance(reply.get(key), str):
            return str(reply[key])
    raise TypeError("no prompt, content or text string")


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(type(t) is int for t in value)


def _llama_ids_reply(reply: Any) -> bool:
    """llama-server's ``/completion`` reply: ``content``, the generated ``tokens`` and why it stopped."""
    return (isinstance(reply, dict) and isinstance(reply.get("content"), str) and _int_list(reply.get("tokens"))
            and completion_stop_type(reply) is not None)


def _sglang_ids_reply(reply: Any) -> bool:
    """SGLang's ``/generate`` reply: ``text``, ``output_ids`` and ``meta_info.finish_reason``."""
    meta = reply.get("meta_info") if isinstance(reply, dict) else None
    return (isinstance(reply, dict) and isinstance(reply.get("text"), str) and _int_list(reply.get("output_ids"))
            and isinstance(meta, dict) and isinstance(meta.get("finish_reason"), dict))


def _vllm_ids_reply(reply: Any) -> bool:
    """vLLM's ``/v1/completions`` reply with ``return_token_ids``: ``choices[0].token_ids``."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return isinstance(first, dict) and isinstance(first.get("text"), str) and _int_list(first.get("token_ids"))


#: fields of an OpenAI-style reply that change on every call
_VOLATILE = ("id", "created", "system_fingerprint")


def _reply_gist(reply: Any) -> str:
    """A probe reply's first 80 characters without its per-call fields (id, creation time).

    Why: the reason is recorded in ``run.json`` and in every trace; quoting the reply's
    timestamp made two probes of one server, a second apart, give two reasons.
    """
    if isinstance(reply, dict):
        reply = {key: value for key, value in reply.items() if key not in _VOLATILE}
    return str(reply)[:80]
