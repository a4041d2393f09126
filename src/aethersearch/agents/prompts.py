"""Prompt texts and the small parsers every agent shares.

Why one module: the prompt text is part of the evaluation contract (its hash goes
into run.json), so it must live in exactly one place, and the Search-R1 strings
must be byte-identical to Search-R1's own code
(``search_r1/llm_agent/generation.py`` and ``scripts/data_process/nq_search.py``):

* Search-R1's user prompt (docs/design/conventions.md), ending in ``Question: {question}\\n``;
* observations ``\\n\\n<information>{results.strip()}</information>\\n\\n``;
* each result ``Doc {i}(Title: {title}) {text}\\n`` with 1-based ``i``, where
  ``title`` is the first line of ``contents`` — i.e. *with* its quotes, since
  ``contents`` is ``"Title"\\nText`` — and ``text`` the remaining lines;
* the invalid-action message below.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aethersearch.errors import ConfigError
from aethersearch.records import Document
from aethersearch.stated_confidence import PROMPT_VARIANTS

__all__ = ["CHAT_TEMPLATES", "DIRECT_PROMPT", "FORCED_FINAL_PROMPT", "NAIVE_RAG_PROMPT", "REACT_SYSTEM_PROMPT",
    "SEARCH_R1_CONFIDENCE_PROMPT", "SEARCH_R1_INVALID_ACTION", "SEARCH_R1_PROMPT", "SEARCH_R1_STOP",
    "apply_chat_template", "extract_answer", "render_search_r1_docs", "search_r1_observation",
    "search_r1_prompt_for", "search_r1_question"]

SEARCH_R1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first "
    "every time you get new information. After reasoning, if you find you lack some knowledge, "
    "you can call a search engine by <search> query </search> and it will return the top "
    "searched results between <information> and </information>. You can search as many times "
    "as your want. If you find no further external knowledge needed, you can directly provide "
    "the answer inside <answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>. Question: {question}\n"
)

_SEARCH_R1_ANSWER_SENTENCE = "without detailed illustrations. For example, <answer> Beijing </answer>. "

#: The ``stated-confidence`` prompt variant (:mod:`aethersearch.stated_confidence`): Search-R1's prompt with
#: its answer sentence asking, inside the answer tags and after the answer, for BrowseComp-Plus's
#: "Confidence: {your confidence score between 0% and 100% for your answer}" (search_agent/prompts.py).
#: Inside the tags because Search-R1 stops generating at ``</answer>``. Braces doubled for ``str.format``.
SEARCH_R1_CONFIDENCE_PROMPT = SEARCH_R1_PROMPT.replace(
    _SEARCH_R1_ANSWER_SENTENCE,
    "without detailed illustrations, and end it, inside the same tags, with your confidence in the answer "
    "in the format Confidence: {{your confidence score between 0% and 100% for your answer}}. "
    "For example, <answer> Beijing Confidence: 90% </answer>. ")

SEARCH_R1_INVALID_ACTION = (
    "\nMy previous action is invalid. If I want to search, I should put the query between "
    "<search> and </search>. If I want to give the final answer, I should put the answer between "
    "<answer> and </answer>. Let me try again.\n"
)

SEARCH_R1_STOP = ["</search>", "</answer>"]

#: Chat templates for applying Search-R1's prompt to instruct/chat checkpoints in text mode.
#: ``raw`` sends the prompt as is (base models); ``qwen2.5`` is Qwen2.5's template with its
#: default system message and ``add_generation_prompt=True``, as Search-R1's infer.py applies it.
CHAT_TEMPLATES: dict[str, str] = {
    "raw": "{prompt}",
    "qwen2.5": (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
        "<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
    ),
}

DIRECT_PROMPT = (
    "Answer the given question directly, without searching. Provide the answer inside <answer> "
    "and </answer>, without detailed illustrations. If you do not know the answer, write "
    "<answer> I don't know </answer>. For example, <answer> Beijing </answer>. "
    "Question: {question}\n"
)

NAIVE_RAG_PROMPT = (
    "Answer the given question using the retrieved documents below. Provide the answer inside "
    "<answer> and </answer>, without detailed illustrations. If the documents and your own "
    "knowledge are not enough, write <answer> I don't know </answer>.\n\n"
    "<information>{results}</information>\n\nQuestion: {question}\n"
)

FORCED_FINAL_PROMPT = (
    "You have used all of your search budget. Give your final answer now inside <answer> and "
    "</answer>, or <answer> I don't know </answer> if you cannot answer."
)

REACT_SYSTEM_PROMPT = (
    "You answer questions by searching a document collection. Use the tools to find evidence; "
    "search with short keyword queries and refine them when results are off-topic. When you "
    "know the answer, reply without a tool call, putting only the short answer inside <answer> "
    "and </answer> (for example <answer> Beijing </answer>). If the evidence is not there and "
    "you do not know, reply <answer> I don't know </answer>."
)

def search_r1_prompt_for(variant: str) -> str:
    """The Search-R1 prompt of a named variant (:data:`aethersearch.stated_confidence.PROMPT_VARIANTS`)."""
    prompts = dict(zip(PROMPT_VARIANTS, (SEARCH_R1_PROMPT, SEARCH_R1_CONFIDENCE_PROMPT), strict=True))
    if variant not in prompts:
        raise ConfigError(f"unknown prompt_variant {variant!r}", fix=f"use one of: {', '.join(PROMPT_VARIANTS)}")
    return prompts[variant]


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def search_r1_question(question: str) -> str:
    """Search-R1's preprocessing: strip, then append ``?`` when the question lacks one."""
    question = question.strip()
    if not question or question[-1] != "?":
        question += "?"
    return question


def render_search_r1_docs(documents: Sequence[Document]) -> str:
    """Search-R1's ``_passages2string``: ``Doc {i}(Title: {title}) {text}\\n`` per document."""
    out = []
    for index, doc in enumerate(documents, start=1):
        # the first line is the title, the rest (newlines kept) the text
        title, text = doc.contents_head()
        out.append(f"Doc {index}(Title: {title}) {text}\n")
    return "".join(out)


def search_r1_observation(results: str) -> str:
    """The text appended after a search: ``\\n\\n<information>{results.strip()}</information>\\n\\n``."""
    return f"\n\n<information>{results.strip()}</information>\n\n"


def extract_answer(text: str) -> str | None:
    """The content of the last ``<answer>…</answer>`` in ``text`` (stripped), or None."""
    matches = _ANSWER_TAG.findall(text)
    return matches[-1].strip() if matches else None


def apply_chat_template(template: str, prompt: str) -> str:
    """Wrap ``prompt`` with a named template from :data:`CHAT_TEMPLATES` or a ``{prompt}`` format."""
    text = CHAT_TEMPLATES.get(template, template)
    if "{prompt}" not in text:
        raise ConfigError(f"chat template {template!r} has no {{prompt}} placeholder",
                          fix=f"use one of {sorted(CHAT_TEMPLATES)} or a string containing {{prompt}}")
    return text.replace("{prompt}", prompt)
