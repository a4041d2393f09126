"""A scripted OpenAI-compatible server on loopback: the test double for every LLM endpoint.

Why a real HTTP server instead of a mocked client: the retry, timeout, connection
reset and concurrency behaviour of :mod:`aethersearch.agents.llm` only shows up
over real sockets. The server speaks ``POST /v1/completions`` and
``POST /v1/chat/completions`` (plus ``GET /v1/models``), replays replies chosen by
a *responder* (a function of the request: scripted lists or rules), and injects
latency and faults — 429 with ``Retry-After``, 500, connection reset (TCP RST),
and stalls — at a seeded rate. It applies ``stop`` strings the way vLLM does (the
stop string is cut and reported as ``stop_reason``) and honours ``max_tokens``
(whitespace tokens, ``finish_reason="length"``).

Like real servers it also answers the model queries of :mod:`aethersearch.agents.served`:
``POST /tokenize`` and ``/detokenize`` (llama-server's shapes; a token is a
whitespace-led word), and, when built with a ``chat_template``, ``GET /props`` and
``POST /apply-template`` (ChatML around the messages). ``token_completion=True``
adds llama-server's ``POST /completion`` (a token-id prompt, the generated ids back
with ``stop_type``; the responder sees ``kind`` ``"completion"`` and the prompt
detokenized) and names ``<|im_end|>`` as ``eos_token`` in ``/props``. ``engine="sglang"``
adds SGLang's native ``POST /generate`` (``input_ids`` in; ``text``, ``output_ids`` with
the EOS id last when the reply ended there, ``meta_info.finish_reason`` ``{"type":
"stop", "matched": id}`` or ``{"type": "length"}`` out); ``engine="vllm"`` answers a
token-id ``prompt`` with ``return_token_ids`` on ``/v1/completions`` as vLLM does
(``choices[0].token_ids`` with the EOS id last, ``prompt_token_ids``). Any token-id
prompt reads as its detokenized text. ``stop_reason=False`` makes it answer like
llama.cpp, which does not say which stop string ended a reply.

Run it in a thread of the test process (:class:`ScriptedServer`, so the test can
count calls per question) or as its own process (:func:`serve_in_process`, for
benchmarks, so the server does not share the client's event loop).
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from aiohttp import web

__all__ = ["Faults", "Reply", "Responder", "SCRIPTED_EOS", "ScriptedRequest", "ScriptedServer", "ServerStats",
    "apply_stop", "count_tokens", "question_of", "request_text", "search_r1_rule", "serve_in_process"]

_TOKEN = re.compile(r"\S+\s*")
#: the end-of-sequence text ``/props`` names when the server continues by token ids
SCRIPTED_EOS = "<|im_end|>"
_PIECE = re.compile(r"\s*\S+|\s+\Z")  # pieces that concatenate back to the text (its /tokenize)
_QUESTION = re.compile(r"Question: (.*?)\n", re.DOTALL)


class ScriptedRequest(NamedTuple):
    """What a responder sees: the endpoint kind, the parsed body and the prompt as one text."""

    kind: str  # "completions" | "chat" | "completion" (llama-server's native route)
    body: dict[str, Any]
    text: str


class Reply(NamedTuple):
    """A scripted reply. ``finish_reason`` None → computed from stop strings / max_tokens."""

    text: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = None


Responder = Callable[[ScriptedRequest], "Reply | str"]


@dataclass
class Faults:
    """Seeded fault injection: each request fails with probability ``rate``, kind drawn from ``kinds``.

    Kinds: ``"429"`` (with ``Retry-After: retry_after_s``), ``"reset"`` (TCP RST),
    ``"stall"`` (sleep ``stall_s`` before replying), ``"badjson"`` (HTTP 200 with a
    truncated, non-JSON body), ``"nochoices"`` (HTTP 200 with ``"choices": []``),
    ``"context"`` (HTTP 400 with vLLM's context-length message), or any other HTTP
    status as digits (``"500"``, ``"503"``, ``"408"``, ``"400"``, …) answered with a
    JSON error.
    """

    rate: float = 0.0
    kinds: Sequence[str] = ("429", "500", "reset", "stall")
    retry_after_s: float = 0.05
    stall_s: float = 30.0
    seed: int = 0


@dataclass
class ServerStats:
    """Counters the tests read: every request, per key (e.g. question), and faults by kind."""

    requests: int = 0
    by_key: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0


def count_tokens(text: str) -> int:
    """Whitespace token count (the scripted server's 'tokenizer')."""
    return len(_TOKEN.findall(text))


def request_text(kind: str, body: Mapping[str, Any]) -> str:
    """The prompt text of a request: ``prompt`` for completions, all message contents for chat."""
    if kind == "completions":
        prompt = body.get("prompt", "")
        return prompt if isinstance(prompt, str) else "".join(map(str, prompt))
    parts = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
    return "\n".join(parts)


def question_of(request: ScriptedRequest) -> str | None:
    """The ``Question: …`` line of a prompt (all built-in prompts carry one), or None."""
    match = _QUESTION.search(request.text + "\n")
    return match.group(1).strip() if match else None


def apply_stop(text: str, stop: Sequence[str], max_tokens: int | None) -> tuple[str, str, str | None]:
    """Cut ``text`` at the earliest stop string (excluded) or at ``max_tokens``: (text, finish, stop)."""
    best: tuple[int, str] | None = None
    for candidate in stop:
        if candidate:
            at = text.find(candidate)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, candidate)
    matched = None
    if best is not None:
        text, matched = text[: best[0]], best[1]
    if max_tokens is not None:
        tokens = _TOKEN.findall(text)
        if len(tokens) > max_tokens:
            return "".join(tokens[:max_tokens]), "length", None
    return text, "stop", matched


def search_r1_rule(answers: Mapping[str, str] | Callable[[str], str], searches: int = 1,
                   query: Callable[[str, int], str] | None = None) -> Responder:
    """A rule-based Search-R1 policy: ``searches`` searches, then ``<answer>`` from ``answers``.

    The question is read from the prompt's ``Question: …`` line and the turn from the
    number of ``<information>`` blocks already in the prompt.
    """

    def respond(request: ScriptedRequest) -> Reply:
        question = question_of(request) or ""
        done = request.text.count("<information>") - 1  # the prompt text mentions the tag once
        if done < searches:
            q = query(question, done) if query else question.rstrip("?")
            return Reply(f"<think>I need to search (turn {done + 1}).</think>\n<search> {q} </search>")
        answer = answers(question) if callable(answers) else answers.get(question, "I don't know")
        return Reply(f"<think>I have enough information.</think>\n<answer> {answer} </answer>")

    return respond


class _App:
    """The aiohttp handlers plus shared state (responder, latency, faults, stats)."""

    def __init__(self, responder: Responder, latency_s: float, faults: Faults | None,
                 key: Callable[[ScriptedRequest], str | None] | None, model: str,
                 chat_template: str | None = None, stop_reason: bool = True, tokenize: bool = True,
                 token_completion: bool = False, engine: str | None = None) -> None:
        self.responder = responder
        self.token_completion = token_completion
        self.engine = engine
        self.chat_template = chat_template
        self.report_stop = stop_reason
        self.serve_tokenizer = tokenize
        self.vocab: dict[str, int] = {}
        self.pieces: list[str] = []
        self.model_queries = 0
        self.latency_s = latency_s
        self.faults = faults or Faults()
        self.rng = random.Random(self.faults.seed)
        self.key = key
        self.model = model
        self.stats = ServerStats()
        self.lock = threading.Lock()

    def build(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        if self.serve_tokenizer:
            app.router.add_post("/tokenize", self.tokenize)
            app.router.add_post("/detokenize", self.detokenize)
        if self.chat_template is not None:
            app.router.add_get("/props", self.props)
            app.router.add_post("/apply-template", self.apply_template)
        if self.token_completion:
            app.router.add_post("/completion", self.native_completion)
        if self.engine == "sglang":
            app.router.add_post("/generate", self.sglang_generate)
        return app

    def _decode(self, ids: Sequence[Any]) -> str:
        with self.lock:
            return "".join(self.pieces[int(t)] for t in ids)

    def _reply_ids(self, request: ScriptedRequest, limit: int | None) -> tuple[list[int], bool]:
        """The reply's ids cut to ``limit`` and whether it ended at EOS (it does unless cut or scripted ``length``)."""
        reply = self.responder(request)
        if isinstance(reply, str):
            reply = Reply(reply)
        ids = self.token_ids(reply.text)
        ended = reply.finish_reason != "length"
        if limit is not None and 0 <= limit < len(ids):
            ids, ended = ids[:limit], False
        return ids, ended

    async def sglang_generate(self, request: web.Request) -> web.Response:
        """SGLang's native ``/generate``: ``input_ids`` in; ``text``, ``output_ids`` (the EOS id last when it
        ended there) and ``meta_info.finish_reason`` (``stop`` with the ``matched`` id, or ``length``) out."""
        body = orjson.loads(await request.read())
        with self.lock:
            self.stats.requests += 1
        prompt = body.get("input_ids") or []
        params = body.get("sampling_params") or {}
        ids, ended = self._reply_ids(ScriptedRequest("generate", body, self._decode(prompt)),
                                     params.get("max_new_tokens"))
        eos_id = self.token_ids(SCRIPTED_EOS)[0]
        finish: dict[str, Any] = ({"type": "stop", "matched": eos_id} if ended
                                  else {"type": "length", "length": len(ids)})
        return web.json_response({"text": self._decode(ids), "output_ids": ids + ([eos_id] if ended else []),
                                  "meta_info": {"id": "scripted", "finish_reason": finish,
                                                "prompt_tokens": len(prompt),
                                                "completion_tokens": len(ids) + (1 if ended else 0)}})

    def vllm_token_reply(self, body: dict[str, Any], prompt: list[int]) -> dict[str, Any]:
        """vLLM's ``/v1/completions`` for a token-id prompt with ``return_token_ids``: ``token_ids`` (the EOS
        id last when it ended there; ``stop_reason`` None) and ``prompt_token_ids``."""
        ids, ended = self._reply_ids(ScriptedRequest("completions", body, self._decode(prompt)),
                                     body.get("max_tokens"))
        eos_id = self.token_ids(SCRIPTED_EOS)[0]
        generated = ids + ([eos_id] if ended else [])
        choice = {"index": 0, "text": self._decode(ids), "finish_reason": "stop" if ended else "length",
                  "stop_reason": None, "logprobs": None, "token_ids": generated, "prompt_token_ids": prompt}
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(generated)}
        return {"id": "cmpl-scripted", "object": "text_completion", "created": int(time.time()),
                "model": self.model, "choices": [choice], "usage": {**usage, "total_tokens": sum(usage.values())}}

    def token_ids(self, text: str) -> list[int]:
        """The scripted tokenizer: whitespace-led words, ids assigned on first sight."""
        ids = []
        with self.lock:
            for piece in _PIECE.findall(text):
                if piece not in self.vocab:
                    self.vocab[piece] = len(self.pieces)
                    self.pieces.append(piece)
                ids.append(self.vocab[piece])
        return ids

    async def tokenize(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        self.model_queries += 1
        if "messages" in body:  # vLLM's chat form: works only for a model with a template
            if self.chat_template is None:
                return web.json_response({"error": {"message": "this model has no chat template"}}, status=400)
            return web.json_response({"tokens": self.token_ids(_chatml(body["messages"]))})
        return web.json_response({"tokens": self.token_ids(str(body.get("content", body.get("prompt", ""))))})

    async def detokenize(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        self.model_queries += 1
        with self.lock:
            return web.json_response({"content": "".join(self.pieces[int(t)] for t in body.get("tokens") or [])})

    async def props(self, request: web.Request) -> web.Response:
        self.model_queries += 1
        props: dict[str, Any] = {"chat_template": self.chat_template, "default_generation_settings": {"n_ctx": 4096}}
        if self.token_completion:
            props["eos_token"] = SCRIPTED_EOS
        return web.json_response(props)

    async def apply_template(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        self.model_queries += 1
        return web.json_response({"prompt": _chatml(body.get("messages") or [])})


    async def native_completion(self, request: web.Request) -> web.Response:
        """llama-server's ``/completion``: the reply cut to ``n_predict`` ids (``limit``), else ``eos``."""
        body = orjson.loads(await request.read())
        prompt = body.get("prompt", "")
        with self.lock:
            self.stats.requests += 1
            text = "".join(self.pieces[int(t)] for t in prompt) if isinstance(prompt, list) else str(prompt)
        reply = self.responder(ScriptedRequest("completion", body, text))
        if isinstance(reply, str):
            reply = Reply(reply)
        ids = self.token_ids(reply.text)
        n_predict = int(body.get("n_predict", -1))
        stop_type = "limit" if reply.finish_reason == "length" else "eos"
        if 0 <= n_predict < len(ids):
            ids, stop_type = ids[:n_predict], "limit"
        with self.lock:
            content = "".join(self.pieces[i] for i in ids)
        answer: dict[str, Any] = {"content": content, "stop": True, "stop_type": stop_type,
                                  "tokens_predicted": len(ids),
                                  "tokens_evaluated": len(prompt) if isinstance(prompt, list) else count_tokens(text)}
        if body.get("return_tokens"):
            answer["tokens"] = ids
        return web.json_response(answer)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "completions")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "chat")

    async def _handle(self, request: web.Request, kind: str) -> web.StreamResponse:
        with self.lock:
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            return await self._respond(request, kind)
        finally:
            with self.lock:
                self.stats.in_flight -= 1

    async def _respond(self, request: web.Request, kind: str) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return web.json_response({"error": {"message": "body is not JSON"}}, status=400)
        prompt = body.get("prompt")
        if kind == "completions" and isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
            if self.engine == "vllm" and body.get("return_token_ids"):
                with self.lock:
                    self.stats.requests += 1
                return web.json_response(self.vllm_token_reply(body, prompt))
            body = {**body, "prompt": self._decode(prompt)}  # a token-id prompt reads as its text, as vLLM's does
        scripted = ScriptedRequest(kind, body, request_text(kind, body))
        with self.lock:
            self.stats.requests += 1
        if kind == "chat":
            bad = _invalid_tool_arguments(body)
            if bad:
                return web.json_response({"error": {"message": bad}}, status=400)
        with self.lock:
            key = self.key(scripted) if self.key else None
            if key is not None:
                self.stats.by_key[key] += 1
            fault = None
            if self.faults.rate and self.rng.random() < self.faults.rate:
                fault = self.rng.choice(list(self.faults.kinds))
                self.stats.faults[fault] += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if fault == "429":
            return web.json_response({"error": {"message": "rate limited"}}, status=429,
                                     headers={"Retry-After": f"{self.faults.retry_after_s:g}"})
        if fault == "badjson":  # a proxy's truncated body
            return web.Response(body=b'{"id": "cmpl-scripted", "choices": [{"text": "tru', status=200,
                                content_type="application/json")
        if fault == "nochoices":  # an overloaded worker's empty reply
            return web.json_response({"id": "cmpl-scripted", "object": "text_completion", "choices": []})
        if fault == "context":  # vLLM's refusal of a prompt longer than the model's context
            return web.json_response({"object": "error", "type": "BadRequestError", "code": 400, "message":
                                      "This model's maximum context length is 4096 tokens. However, you "
                                      "requested 4608 tokens (4096 in the messages, 512 in the completion)."},
                                     status=400)
        if fault is not None and fault.isdigit():  # "500", "503", "408", "409", "400", …
            return web.json_response({"error": {"message": f"injected HTTP {fault}"}}, status=int(fault))
        if fault == "reset":
            _reset(request)
            raise asyncio.CancelledError
        if fault == "stall":
            await asyncio.sleep(self.faults.stall_s)
        reply = self.responder(scripted)
        if isinstance(reply, str):
            reply = Reply(reply)
        return web.Response(body=orjson.dumps(self._payload(kind, body, scripted.text, reply)),
                            content_type="application/json")

    def _payload(self, kind: str, body: dict[str, Any], prompt: str, reply: Reply) -> dict[str, Any]:
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        text, finish, matched = apply_stop(reply.text, stop, body.get("max_tokens"))
        if reply.finish_reason is not None:
            finish, matched = reply.finish_reason, None
        elif reply.tool_calls:
            finish = "tool_calls"
        usage = {"prompt_tokens": count_tokens(prompt), "completion_tokens": count_tokens(text)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        created = int(time.time())
        if kind == "completions":
            choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish,
                                      "stop_reason": matched if self.report_stop else None, "logprobs": None}
            return {"id": "cmpl-scripted", "object": "text_completion", "created": created,
                    "model": self.model, "choices": [choice], "usage": usage}
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        choice = {"index": 0, "message": message, "finish_reason": finish, "stop_reason": matched}
        return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": created,
                "model": self.model, "choices": [choice], "usage": usage}


_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}


def _schema_problem(arguments: dict[str, Any], schema: Mapping[str, Any]) -> str | None:
    """The first way ``arguments`` breaks a tool's ``parameters`` schema (required, extra keys, types)."""
    properties = schema.get("properties") or {}
    missing = [key for key in schema.get("required") or [] if key not in arguments]
    if missing:
        return f"missing required argument(s) {missing}"
    if schema.get("additionalProperties") is False:
        extra = sorted(set(arguments) - set(properties))
        if extra:
            return f"unexpected argument(s) {extra}"
    for key, value in arguments.items():
        expected = _JSON_TYPES.get((properties.get(key) or {}).get("type", ""))
        if expected is not None and not isinstance(value, expected):
            return f"argument {key!r} is not of type {properties[key]['type']}"
    return None


def _invalid_tool_arguments(body: Mapping[str, Any]) -> str | None:
    """Like a strict real server, reject a conversation that replays an invalid tool call.

    Rejected: arguments that are not a JSON object; a tool that is not offered in
    ``tools``, or arguments that break its ``parameters`` schema (when ``tools`` is
    sent); a ``tool`` message answering a call id no earlier assistant message made.
    Agents must never replay a malformed call: this is what makes tests catch it.
    """
    offered = {}
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            offered[function["name"]] = function.get("parameters") or {}
    call_ids: set[str] = set()
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            return "a message is not a JSON object"
        if message.get("role") == "tool" and message.get("tool_call_id") not in call_ids:
            return f"tool message answers unknown tool_call_id {message.get('tool_call_id')!r}"
        for call in message.get("tool_calls") or []:
            function = (call.get("function") if isinstance(call, dict) else None) or {}
            arguments = function.get("arguments")
            try:
                parsed = orjson.loads(arguments) if isinstance(arguments, (str, bytes)) else None
            except (orjson.JSONDecodeError, TypeError):
                parsed = None
            if not isinstance(parsed, dict):
                return f"invalid tool call arguments in the conversation: {arguments!r}"
            if offered:
                name = function.get("name")
                if name not in offered:
                    return f"tool call to {name!r}, which is not among the offered tools {sorted(offered)}"
                problem = _schema_problem(parsed, offered[name])
                if problem:
                    return f"tool call {name}({arguments}) in the conversation: {problem}"
            call_ids.add(call.get("id"))
    return None


def _reset(request: web.Request) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), as a crashed proxy would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


class ScriptedServer:
    """The scripted server running in a background thread of this process.

    ``with ScriptedServer(responder, latency_s=0.01) as server: OpenAIClient(server.url, "m")``.
    ``server.stats`` counts requests (``by_key`` groups them by ``key(request)``).
    """

    def __init__(self, responder: Responder, *, latency_s: float = 0.0, faults: Faults | None = None,
                 key: Callable[[ScriptedRequest], str | None] | None = question_of,
                 host: str = "127.0.0.1", port: int = 0, model: str = "scripted",
                 chat_template: str | None = None, stop_reason: bool = True, tokenize: bool = True,
                 token_completion: bool = False, engine: str | None = None) -> None:
        self._app = _App(responder, latency_s, faults, key, model, chat_template, stop_reason, tokenize,
                         token_completion, engine)
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def stats(self) -> ServerStats:
        """Live request counters."""
        return self._app.stats

    @property
    def url(self) -> str:
        """Base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ScriptedServer:
        """Start serving; returns once the port is bound."""
        self._thread = threading.Thread(target=self._serve, name="scripted-llm", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start_site())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:  # stalled handlers: cancel rather than wait them out
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        if self._runner is not None:
            loop.run_until_complete(self._runner.cleanup())
        loop.close()

    async def _start_site(self) -> None:
        self._runner = web.AppRunner(self._app.build(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_process(responder: Responder, port_queue: Any, latency_s: float = 0.0,
                     faults: Faults | None = None, host: str = "127.0.0.1") -> None:
    """Target for ``multiprocessing.Process``: serve forever, putting the bound port on ``port_queue``."""

    async def main() -> None:
        runner = web.AppRunner(_App(responder, latency_s, faults, None, "scripted").build(),
                               access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, 0).start()
        port_queue.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def _chatml(messages: Sequence[Mapping[str, Any]]) -> str:
    """The scripted server's chat template: ChatML with the generation prompt."""
    turns = "".join(f"<|im_start|>{m.get('role')}\n{m.get('content')}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"
