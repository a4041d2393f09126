"""Pluggable tokenizers for observation cuts (Search-R1's 500-token limit) and token counts.

Why pluggable: Search-R1 cuts each observation to ``max_obs_length`` tokens of the
*policy's* tokenizer. Bit-compatibility needs that tokenizer (``hf:<name or path>``,
loaded with ``transformers`` when installed); without one we fall back to a
documented approximation (``regex``: a word or a single punctuation mark is one
token, which over-counts slightly against BPE on English). The tokenizer's name
is recorded in the agent config, hence in run.json, so runs with different cuts
never compare as equal.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol, runtime_checkable

from aethersearch.errors import ConfigError

_REGEX_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens and cuts text to the first ``n`` tokens."""

    name: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def truncate(self, text: str, n: int) -> str:
        """``text`` cut after its first ``n`` tokens (unchanged when shorter)."""
        ...


@lru_cache(maxsize=16)
def _first_tokens(n: int) -> re.Pattern[str]:
    """A pattern matching exactly the first ``n`` regex tokens (and the whitespace between)."""
    return re.compile(r"(?:\s*+(?:\w++|[^\w\s])){%d}" % n, re.UNICODE)  # possessive: no backtracking


class RegexTokenizer:
    """Approximation: words and single punctuation marks; cuts keep the original characters."""

    name = "regex"

    def count(self, text: str) -> int:
        """Number of regex tokens."""
        return sum(1 for _ in _REGEX_TOKEN.finditer(text))

    def truncate(self, text: str, n: int) -> str:
        """Cut right after the n-th token (whitespace after it is dropped, as a decoder would)."""
        if n <= 0:
            return ""
        head = _first_tokens(n).match(text)  # one C-level match, no per-token Python objects
        if head is None or _REGEX_TOKEN.search(text, head.end()) is None:
            return text  # n tokens or fewer: unchanged
        return text[: head.end()]


class HFTokenizer:
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
        """Keep the first ``n`` token ids and decode them (as Search-R1 does on ids)."""
        ids = self._tok(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= n:
            return text
        return str(self._tok.decode(ids[:n], skip_special_tokens=True))


@lru_cache(maxsize=8)
def get_tokenizer(spec: str = "regex") -> Tokenizer:
    """``"regex"`` or ``"hf:<name or path>"``."""
    if spec == "regex":
        return RegexTokenizer()
    if spec.startswith("hf:") and len(spec) > 3:
        return HFTokenizer(spec[3:])
    raise ConfigError(f"unknown tokenizer {spec!r}", fix="use 'regex' or 'hf:<model name or path>'")
