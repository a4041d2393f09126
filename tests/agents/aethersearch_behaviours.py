"""Scripted behaviours and the corpus shared by ``--agent aethersearch`` and AetherSearch's own loop.

The same functions drive both loops: ours through the scripted OpenAI-compatible
server, theirs (``scripts/record_aethersearch_loop.py``, their
``async_eval_worker._evaluate_row`` at d2a21bd) through a stand-in for
``model.generate``. A behaviour is a function of the context text only, so both
loops see the same model. The corpus is 40 real Wikispeedia articles (long: a
top-3 observation is cut at 500 tokens), ranked by word overlap.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import unquote

from aethersearch.environment import ToolResult
from aethersearch.records import Document, ToolCall

EOS = "<|im_end|>"
ASSISTANT = "<|im_start|>assistant\n"
_QUESTION = re.compile(r"Question: (.*?)\n", re.DOTALL)
_WORD = re.compile(r"\w+")

Behaviour = Callable[[str], str]


def _turn(context: str) -> int:
    """How many actions the model already wrote in this episode (each ended with EOS)."""
    return context.split(ASSISTANT, 1)[-1].count(EOS)


def _question(context: str) -> str:
    match = _QUESTION.search(context)
    return match.group(1).strip() if match else ""


def behaviours(gold: Mapping[str, str]) -> dict[str, Behaviour]:
    """The four behaviours of issue 34; ``gold`` maps the question as seen to its first alias."""

    def query(context: str) -> str:
        return _question(context).rstrip("?")

    def answer(context: str) -> str:
        return f"<think>I know it now.</think>\n<answer> {gold.get(_question(context), 'unknown')} </answer>"

    def invalid_then_answer(context: str) -> str:
        return "Let me think about this question first." if _turn(context) == 0 else answer(context)

    def writes_past_search(context: str) -> str:
        if _turn(context) == 0:
            return f"<think>I need to search.</think>\n<search> {query(context)} </search>\nI will wait."
        return answer(context)

    def always_searches(context: str) -> str:
        return f"<think>Search again.</think>\n<search> {query(context)} part {_turn(context)} </search>"

    def search_then_answer(context: str) -> str:
        if _turn(context) == 0:
            return f"<think>I need to search.</think>\n<search> {query(context)} </search>"
        return answer(context)

    return {"invalid_then_answer": invalid_then_answer, "writes_past_search": writes_past_search,
            "always_searches": always_searches, "search_then_answer": search_then_answer}


def corpus(wikispeedia: Path, n: int = 40) -> list[Document]:
    """The first ``n`` Wikispeedia plain-text articles (sorted by file name) as documents."""
    docs: list[Document] = []
    with tarfile.open(wikispeedia / "plaintext_articles.tar.gz") as archive:
        for member in sorted((m for m in archive.getmembers() if m.isfile()), key=lambda m: m.name)[:n]:
            handle = archive.extractfile(member)
            assert handle is not None
            title = unquote(Path(member.name).stem).replace("_", " ")
            docs.append(Document(id=f"ws{len(docs)}", title=title, text=handle.read().decode("utf-8").strip()))
    return docs


class OverlapEnv:
    """Ranks documents by the number of distinct query words they contain (ties by corpus order)."""

    tools = ("search",)

    def __init__(self, docs: list[Document]) -> None:
        self.docs = docs
        self.words = [{w.lower() for w in _WORD.findall(doc.contents)} for doc in docs]

    def rank(self, query: str, k: int) -> list[Document]:
        """The top ``k`` documents for ``query`` (synchronous: their retriever is)."""
        wanted = {w.lower() for w in _WORD.findall(query)}
        scored = sorted((-len(wanted & words), order) for order, words in enumerate(self.words) if wanted & words)
        return [self.docs[order] for _, order in scored[:k]]

    async def search(self, query: str, k: int) -> ToolResult:
        """The environment protocol's search."""
        hits = self.rank(query, k)
        return ToolResult(hits, ToolCall(tool="search", arguments={"query": query, "k": k},
                                         returned_ids=[d.id for d in hits]))

    async def close(self) -> None:
        """Nothing to release."""
