"""Tokenizers for observation cuts (Search-R1's 500-token limit), context limits and token counts.

Why the *served* tokenizer by default: Search-R1 cuts each observation to
``max_obs_length`` tokens of the policy's own tokenizer. On real Wikipedia top-3
observations Qwen2.5's tokenizer cuts 44% of them, a word regex 0.7%: the cut is
part of what the checkpoint sees. The choices, recorded in the agent config (so in
run.json) and per step in the trace notes:

* ``served`` (default) — the model server's own tokenize/detokenize endpoints
  (:mod:`aethersearch.agents.served`; results cached per text);
* ``hf:<name or path>`` — a local Hugging Face tokenizer (``transformers``), for a
  server that has no tokenize endpoint;
* ``regex`` — a word or a single punctuation mark is one token: an approximation
  that must be asked for explicitly.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from aethersearch.errors import ConfigError

if TYPE_CHECKING:
    from aethersearch.agents.llm import LLM

__all__ = ["HFTokenizer", "LocalCut", "ObservationTokenizer", "RegexTokenizer", "ServedCut", "Tokenizer",
    "check_tokenizer_spec", "get_tokenizer", "observation_tokenizer"]

_REGEX_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_WORD, _SPACE = re.compile(r"\w", re.UNICODE), re.compile(r"\s", re.UNICODE)


def _char_class(char: str) -> str:
    """``a`` for a word character, a space for whitespace, ``.`` for anything else (as the regex sees it)."""
    return "a" if _WORD.match(char) else " " if _SPACE.match(char) else "."


class _CharClasses(dict[int, str]):
    """Code point → its class character, filled on first sight (a ``str.translate`` table)."""

    def __missing__(self, code: int) -> str:
        value = self[code] = _char_class(chr(code))
        return value


_CLASSES = _CharClasses()
#: ASCII byte → class byte, so an ASCII text is classified by one C-level ``bytes.translate``
_ASCII_CLASSES = bytes.maketrans(bytes(range(128)), "".join(_char_class(chr(c)) for c in range(128)).encode())
_CLASS_ERRORS = "aethersearch.regex-token-class"
_MARKS_AS_SPACES = bytes.maketrans(b".", b" ")


def _classify_non_ascii(exc: UnicodeError) -> tuple[str, int]:
    """Encoding error handler: a run of non-ASCII characters becomes its class characters."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return exc.object[exc.start:exc.end].translate(_CLASSES), exc.end


codecs.register_error(_CLASS_ERRORS, _classify_non_ascii)


class Tokenizer(Protocol):
    """Counts tokens and cuts text to its first or last ``n`` tokens; may render a chat template."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def truncate(self, text: str, n: int) -> str:
        """``text`` cut after its first ``n`` tokens (unchanged when shorter)."""
        ...

    def keep_last(self, text: str, n: int) -> str:
        """``text`` from its ``n``-th last token on (unchanged when shorter)."""
        ...

    def render_chat(self, messages: list[dict[str, str]]) -> str | None:
        """The tokenizer's own chat template around ``messages`` with the generation prompt; None (the
        default) when it has none."""
        return None


@lru_cache(maxsize=16)
def _first_tokens(n: int) -> re.Pattern[str]:
    """A pattern matching exactly the first ``n`` regex tokens (and the whitespace between)."""
    return re.compile(r"(?:\s*+(?:\w++|[^\w\s])){%d}" % n, re.UNICODE)  # possessive: no backtracking


class RegexTokenizer(Tokenizer):
    """Approximation: words and single punctuation marks; cuts keep the original characters."""

    name = "regex"

    def count(self, text: str) -> int:
        """Number of regex tokens, without a match object per token.

        Why not ``len(findall(...))``: one observation has ~150 tokens and the regex
        engine's per-match cost made the count ~50 µs, the largest single item of the
        rollout harness's CPU per model call. Each character is mapped to its class
        (word ``a``, space, other ``.``) by C-level ``bytes.translate`` (non-ASCII
        runs through an encoding error handler, classified by the same ``\\w``/``\\s``),
        and the tokens are the ``.`` plus the starts of ``a`` runs: equal to the
        regex count for every text (a property test checks it), 5-10x faster.
        """
        classes = text.encode("ascii", _CLASS_ERRORS).translate(_ASCII_CLASSES)
        # a word starts at an ``a`` after a space or a mark: with marks read as spaces, after a space
        # (one two-byte count instead of two: the costly part of the count; issue 16)
        starts = classes.translate(_MARKS_AS_SPACES)
        return classes.count(b".") + starts.count(b" a") + starts.startswith(b"a")

    def truncate(self, text: str, n: int) -> str:
        """Cut right after the n-th token (whitespace after it is dropped, as a decoder would)."""
        if n <= 0:
            return ""
        head = _first_tokens(n).match(text)  # one C-level match, no per-token Python objects
        if head is None or _REGEX_TOKEN.search(text, head.end()) is None:
            return text  # n tokens or fewer: unchanged
        return text[: head.end()]

    def keep_last(self, text: str, n: int) -> str:
        """Keep the text from the ``n``-th last token on."""
        starts = [m.start() for m in _REGEX_TOKEN.finditer(text)]
        if len(starts) <= n:
            return text
        return text[starts[-n]:] if n > 0 else ""


class HFTokenizer(Tokenizer):
    """A Hugging Face tokenizer (the policy's own), encoding without special tokens."""

    def __init__(self, name_or_path: str) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ConfigError(f"tokenizer 'hf:{name_or_path}' needs the transformers package",
                              fix="pip install transformers, or use tokenizer='regex'") from None
        self._tok = AutoTokenizer.from_pretrained(name_or_path)
        self.name = f"hf:{name_or_path}"

    def count(self, text: str) -> int:
        """Number of tokens."""
        return len(self._tok(text, add_special_tokens=False)["input_ids"])

    def truncate(self, text: str, n: int) -> str:
        """Keep the first ``n`` token ids and decode them (as Search-R1 keeps the ids)."""
        ids = self._tok(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= n:
            return text
        return str(self._tok.decode(ids[:n], skip_special_tokens=False))

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The tokenizer's chat template around ``messages``, with the generation prompt (as infer.py)."""
        return str(self._tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))

    def keep_last(self, text: str, n: int) -> str:
        """Keep the last ``n`` token ids (Search-R1's left truncation of the rolling context)."""
        ids = self._tok(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= n:
            return text
        return str(self._tok.decode(ids[-n:], skip_special_tokens=False))


@lru_cache(maxsize=8)
def get_tokenizer(spec: str = "regex") -> Tokenizer:
    """``"regex"`` or ``"hf:<name or path>"`` (a local tokenizer; ``served`` needs a server: see below)."""
    if spec == "regex":
        return RegexTokenizer()
    if spec.startswith("hf:") and len(spec) > 3:
        return HFTokenizer(spec[3:])
    raise ConfigError(f"unknown tokenizer {spec!r}",
                      fix="use 'served' (the model server's own), 'hf:<model name or path>' or 'regex'")


class ObservationTokenizer(Protocol):
    """The async cut the agents use: the served tokenizer is a network call."""

    name: str

    async def truncate(self, text: str, n: int) -> tuple[str, int]:
        """(``text`` cut to its first ``n`` tokens, its token count before the cut)."""
        ...

    async def keep_last(self, text: str, n: int) -> tuple[str, int]:
        """(``text`` cut to its last ``n`` tokens, its token count before the cut)."""
        ...


class LocalCut:
    """A local tokenizer (``regex`` or ``hf:…``) behind the async interface."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tok = tokenizer
        self.name = tokenizer.name

    async def truncate(self, text: str, n: int) -> tuple[str, int]:
        """First ``n`` tokens (counted first: a text within ``n`` is returned without a second scan)."""
        count = self._tok.count(text)
        return (self._tok.truncate(text, n) if count > n or n <= 0 else text), count

    async def keep_last(self, text: str, n: int) -> tuple[str, int]:
        """Last ``n`` tokens."""
        count = self._tok.count(text)
        return (self._tok.keep_last(text, n) if count > n else text), count


class ServedCut:
    """The served model's tokenizer: cut on its token ids, text back through its detokenizer."""

    name = "served"

    def __init__(self, served: Any) -> None:
        self._served = served

    async def truncate(self, text: str, n: int) -> tuple[str, int]:
        """First ``n`` served tokens (unchanged when shorter)."""
        ids = await self._served.tokenize(text)
        if len(ids) <= n:
            return text, len(ids)
        return await self._served.detokenize(ids[:n]), len(ids)

    async def keep_last(self, text: str, n: int) -> tuple[str, int]:
        """Last ``n`` served tokens (unchanged when shorter)."""
        ids = await self._served.tokenize(text)
        if len(ids) <= n:
            return text, len(ids)
        return await self._served.detokenize(ids[-n:]), len(ids)


def check_tokenizer_spec(spec: str) -> None:
    """Fail at agent construction (not once per question) on a bad tokenizer setting."""
    if spec != "served":
        get_tokenizer(spec)


def observation_tokenizer(spec: str, llm: LLM) -> ObservationTokenizer:
    """The cut for ``spec``: ``served`` asks ``llm``'s server; the others are local."""
    if spec != "served":
        return LocalCut(get_tokenizer(spec))
    served = llm.served
    if served is None:
        raise ConfigError("tokenizer 'served' needs an OpenAI-compatible model server to tokenize with",
                          fix="pass --agent-config tokenizer=hf:<model name or path>, or tokenizer=regex")
    return ServedCut(served)
