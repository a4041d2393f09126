"""``prompt_format`` (auto | chat | raw): whether the model sees its chat template, decided once, recorded.

Why: Search-R1's ``infer.py`` applies the tokenizer's chat template whenever the
tokenizer has one (``if tokenizer.chat_template: apply_chat_template(...,
add_generation_prompt=True)``) — for instruct *and* base checkpoints, since Qwen2.5
base tokenizers carry a template. Sending raw text to such a model changes what it
sees. The rule, applied by every text agent (search-r1, direct, naive-rag):

* ``raw`` — the prompt text as is (``/v1/completions``);
* ``chat`` — the model's template around one user message with the generation
  prompt. Agents that continue the text themselves (search-r1) get it rendered
  (a local ``chat_template`` if one is named, else a local ``hf:`` tokenizer's,
  else the server's own: llama.cpp ``/apply-template``, vLLM ``/tokenize`` with
  ``messages``) and then complete; one-call agents use ``/v1/chat/completions``;
* ``auto`` (default) — ``chat`` when the server reports a template, ``raw`` when it
  reports none *or cannot say* (plain llama-cpp-python, hosted APIs): pass
  ``prompt_format=chat`` there to use the chat endpoint.

A named local ``chat_template`` (``qwen2.5``, or a string with ``{prompt}``) decides by
itself (``raw`` means none). The decision and its reason go into each trace's first
step notes; the server's answer goes into ``run.json`` (``ServerFacts``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from aethersearch.agents.prompts import CHAT_TEMPLATES, apply_chat_template
from aethersearch.agents.tokenizers import get_tokenizer
from aethersearch.errors import ConfigError

if TYPE_CHECKING:
    from aethersearch.agents.llm import LLM

__all__ = ["PROMPT_FORMATS", "PromptFormat", "SERVED", "check_prompt_settings", "render_chat_prompt",
    "resolve_format", "template_text"]

PROMPT_FORMATS = ("auto", "chat", "raw")
SERVED = "served"


class PromptFormat(NamedTuple):
    """The format an episode uses and why (recorded in the trace)."""

    format: str  # "chat" | "raw"
    reason: str


def check_prompt_settings(prompt_format: str, chat_template: str) -> None:
    """Reject bad settings at agent construction, not once per question."""
    if prompt_format not in PROMPT_FORMATS:
        raise ConfigError(f"unknown prompt_format {prompt_format!r}", fix=f"use one of {PROMPT_FORMATS}")
    if chat_template == SERVED:
        return
    apply_chat_template(chat_template, "")  # unknown name / no {prompt}: ConfigError
    if prompt_format == "raw" and chat_template != "raw":
        raise ConfigError(f"prompt_format='raw' contradicts chat_template={chat_template!r}",
                          fix="drop one of the two settings")
    if prompt_format == "chat" and chat_template == "raw":
        raise ConfigError("prompt_format='chat' contradicts chat_template='raw'", fix="drop one of the two settings")


def template_text(chat_template: str) -> str:
    """The template text hashed into run.json (``served`` stands for the server's own)."""
    return SERVED if chat_template == SERVED else CHAT_TEMPLATES.get(chat_template, chat_template)


async def resolve_format(prompt_format: str, chat_template: str, llm: LLM) -> PromptFormat:
    """Decide chat or raw for this endpoint (the server is asked once per client and cached)."""
    if chat_template != SERVED:
        chosen = "raw" if chat_template == "raw" else "chat"
        return PromptFormat(chosen, f"local chat_template={chat_template!r}")
    if prompt_format != "auto":
        return PromptFormat(prompt_format, f"prompt_format={prompt_format!r}")
    served = llm.served
    if served is None:
        return PromptFormat("raw", "auto: the endpoint cannot be asked for its chat template")
    facts = await served.facts()
    if facts.chat_template is True:
        return PromptFormat("chat", f"auto: the server reports a chat template ({facts.template_source})")
    if facts.chat_template is False:
        return PromptFormat("raw", f"auto: the server reports no chat template ({facts.template_source})")
    return PromptFormat("raw", "auto: the server does not say whether it has a chat template")


async def render_chat_prompt(prompt: str, chat_template: str, tokenizer: str, llm: LLM) -> str:
    """``prompt`` as one user turn in the model's chat template, with the generation prompt, as text."""
    if chat_template != SERVED:
        return apply_chat_template(chat_template, prompt)
    messages = [{"role": "user", "content": prompt}]
    if tokenizer.startswith("hf:"):
        rendered = get_tokenizer(tokenizer).render_chat(messages)
        if rendered is not None:
            return rendered
    served = llm.served
    rendered = await served.render_chat(messages) if served is not None else None
    if rendered is None:
        raise ConfigError("prompt_format 'chat' needs the chat template rendered, and the server cannot do it",
                          fix="pass --agent-config chat_template=<name or template with {prompt}>, or "
                              "tokenizer=hf:<model> (a local copy of its tokenizer), or prompt_format=raw")
    return str(rendered)
