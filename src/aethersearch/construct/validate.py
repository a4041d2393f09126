"""Chain-necessity validators: is the reasoning chain the only way to the answer?

A validator sees a :class:`Candidate` (the triple, its chosen path, the other
shortest paths, and the chain mask the sandbox will apply) and returns a
:class:`Verdict`. The construction keeps a candidate only if every validator
accepts it, and counts rejections by ``reason``.

``ChainValidator`` is the plug-in point (e.g. an LLM judge reading the chain
pages through an OpenAI-compatible endpoint); :class:`RuleBasedValidator` is
the default and needs nothing but the pages.

Definitions used by the rule-based check (all on the text *as the sandbox
serves it*, i.e. after :meth:`ChainMask.render`, titles included):

* **The answer appears on a page**: some gold alias, normalised (lower-case
  word tokens, articles dropped, punctuation as a separator: ``_norm``), occurs
  as a whole-token sequence in the page's normalised title or in one of the
  normalised sentences the mask keeps (sentences as ``mask.split_sentences``
  cuts them).
* **Pages reachable without the chain**: every page of the corpus except the
  chain nodes ``v1..vn``. An agent can open any of them without visiting a
  single chain node: unmasked pages are searchable and visitable from the
  start, while ``v1`` is reached by visiting ``v0`` (that *is* the first chain
  step) and ``v_(i+1)`` only through ``v_i``. ``v0`` itself is in this set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from itertools import pairwise
from typing import NamedTuple, Protocol, runtime_checkable

from aethersearch.construct.infobox import short_name
from aethersearch.construct.statements import hop_statement
from aethersearch.construct.triples import QATriple
from aethersearch.corpus.page_texts import LruCache
from aethersearch.records import Document
from aethersearch.sandbox.mask import ChainMask, split_sentences

__all__ = ["ACCEPT", "CACHE_CHARS", "Candidate", "ChainValidator", "RuleBasedValidator", "Verdict"]


class Candidate(NamedTuple):
    """A triple with its chosen shortest path (page ids ``v0..vn``) and the mask built for it."""

    triple: QATriple
    path: list[str]
    alternatives: list[list[str]]
    mask: ChainMask


class Verdict(NamedTuple):
    """``ok``; otherwise a short machine ``reason`` (counted in the summary) and a human ``detail``."""

    ok: bool
    reason: str | None = None
    detail: str = ""


ACCEPT = Verdict(True)


@runtime_checkable
class ChainValidator(Protocol):
    """Decides whether a candidate's chain is necessary (and usable) for its answer."""

    name: str

    def validate(self, candidate: Candidate) -> Verdict:
        """Accept, or reject with a reason key such as ``answer_on_subject_page``."""
        ...


_WORD = re.compile(r"[^\W_]+")
_ARTICLES = frozenset({"a", "an", "the"})
_BREAK = "zqxsentencebreakzqx"
#: characters of normalised page text and sentences a RuleBasedValidator keeps between checks (bounded, so a
#: full dump's construction does not hold every page it looked at)
CACHE_CHARS = 64_000_000


def _norm(text: str) -> str:
    """Lower-case word tokens without articles, space-padded: ``needle in _norm(text)`` = token-sequence match.

    Like ``text.normalize_answer`` except that punctuation separates tokens
    instead of being deleted ("Guinea-Bissau" -> "guinea bissau"); applied to
    both the aliases and the pages, so matching stays consistent, and it is a
    single C-level regex pass (the whole corpus is scanned).
    """
    return " " + " ".join(t for t in _WORD.findall(text.lower()) if t not in _ARTICLES) + " "


class RuleBasedValidator:
    """The default validator: answer hidden off-chain, chain followable, chain grounded.

    Rejection reasons, checked in this order:

    * ``answer_in_question`` -- a gold alias occurs in the question itself.
    * ``answer_on_subject_page`` -- a gold alias survives on ``v0``'s served page.
    * ``answer_reachable_without_chain`` -- a gold alias survives on some other
      page reachable without the chain (see the module docstring).
    * ``chain_broken`` -- some ``v_(i-1)``'s served page does not both link to
      and mention ``v_i``, so the chain could not be followed in the sandbox.
    * ``no_served_hop_statement`` -- some ``v_(i-1)``'s served page has no
      prose sentence naming ``v_i`` (``statements.hop_statement``: 4-45 words,
      not a list dump, and before the last hop not naming the answer), so the
      hop is linked but never *stated* to the agent.
    * ``ungrounded_chain`` (when ``require_grounding``) -- no chain page after
      ``v0`` mentions ``v0`` by title, so nothing along the chain ties the
      answer back to the question's subject.
    """

    name = "rule-based"

    def __init__(self, pages: Mapping[str, Document], *, require_grounding: bool = True,
                 answers: Iterable[str] | None = None, cache_chars: int = CACHE_CHARS) -> None:
        """``answers``: every gold alias the validator will be asked about (all seeds' answers), when known
        up front: the corpus token index then holds only their tokens, built in one streamed pass over the
        pages, instead of every token of every page; without it the first lookup indexes every token (the
        in-memory callers' behaviour). Either way a lookup gives the same pages. ``cache_chars`` bounds the
        normalised page texts and sentences kept between checks, so memory stays flat in the corpus size."""
        self.pages = pages
        self.require_grounding = require_grounding
        self._normalised = LruCache(cache_chars)
        self._token_pages: dict[str, list[str]] = {}
        self._declared = {token for answer in answers for token in _norm(answer).split()} \
            if answers is not None else None
        self._indexed: set[str] | None = None  # tokens indexed so far; None: the index is not built yet
        self._every_token = False
        self._sentences = LruCache(cache_chars)
        self._containing: dict[str, list[str]] = {}
        self._hits: dict[tuple[str, str], list[str]] = {}

    def _normalised_page(self, page: str) -> str:
        cached = self._normalised.get(page)
        if cached is None:
            doc = self.pages[page]
            cached = _norm(f"{doc.title}\n{doc.text}")
            self._normalised.put(page, cached, len(cached))
        return str(cached)

    def _index_tokens(self, wanted: set[str] | None) -> None:
        """Add the pages holding each ``wanted`` token (every token: None) in one streamed pass, page order."""
        index = self._token_pages
        for doc in self.pages.values():
            found = set(_norm(f"{doc.title}\n{doc.text}").split())
            for token in found if wanted is None else found & wanted:
                index.setdefault(token, []).append(doc.id)
        self._indexed = (self._indexed or set()) | (wanted or set())
        self._every_token = self._every_token or wanted is None

    def _pages_containing(self, needle: str) -> list[str]:
        """Pages whose *raw* title + text contain ``needle`` (token index, then substring check; cached)."""
        if needle not in self._containing:
            tokens = needle.split()
            if self._indexed is None:
                self._index_tokens(None if self._declared is None else self._declared | set(tokens))
            elif not self._every_token and not self._indexed.issuperset(tokens):
                self._index_tokens(set(tokens) - self._indexed)
            if not tokens:
                self._containing[needle] = []
            else:
                rarest = min(tokens, key=lambda t: len(self._token_pages.get(t, ())))
                self._containing[needle] = [pid for pid in self._token_pages.get(rarest, ())
                                            if needle in self._normalised_page(pid)]
        return self._containing[needle]

    def _page_sentences(self, page: str) -> list[tuple[str, str]]:
        """``(raw, normalised)`` per sentence, normalised in one regex pass over the page (cached, bounded)."""
        cached = self._sentences.get(page)
        if cached is None:
            raws = split_sentences(self.pages[page].text)
            joined = _norm(f" {_BREAK} ".join(raws))
            norms = [f" {part.strip()} " for part in joined.split(f" {_BREAK} ")]
            if len(norms) != len(raws):  # a sentence contained the marker itself: do it one by one
                norms = [_norm(raw) for raw in raws]
            cached = list(zip(raws, norms, strict=True))
            self._sentences.put(page, cached, 2 * sum(len(raw) for raw in raws) + 1)
        return cached  # type: ignore[return-value]

    def _needle_sentences(self, page: str, needle: str) -> list[str]:
        key = (page, needle)
        if key not in self._hits:
            self._hits[key] = [raw for raw, norm in self._page_sentences(page) if needle in norm]
        return self._hits[key]

    def _served_contains(self, mask: ChainMask, page: str, needles: list[str]) -> bool:
        """Whether a needle survives in the page as served: in its title, or in a sentence the mask keeps.

        Equivalent to normalising ``mask.render(page)`` sentence by sentence,
        without rendering: only sentences that contain a needle are tested
        against the page's withheld-mention patterns.
        """
        title = _norm(self.pages[page].title)
        if any(needle in title for needle in needles):
            return True
        patterns = mask.patterns_for(page)
        for needle in needles:
            for raw in self._needle_sentences(page, needle):
                if not any(p.search(raw) for p in patterns):
                    return True
        return False

    def validate(self, candidate: Candidate) -> Verdict:
        """Apply the checks listed in the class docstring."""
        triple, path, mask = candidate.triple, candidate.path, candidate.mask
        needles = [_norm(a) for a in triple.answers if _norm(a).strip()]
        question = _norm(triple.question)
        if any(needle in question for needle in needles):
            return Verdict(False, "answer_in_question", f"the question {triple.question!r} contains the answer")
        v0 = path[0]
        if self._served_contains(mask, v0, needles):
            return Verdict(False, "answer_on_subject_page", f"answer still visible on the subject page {v0!r}")
        chain = set(path[1:])
        for needle in needles:
            for page in self._pages_containing(needle):
                if page in chain or page == v0:
                    continue
                if self._served_contains(mask, page, needles):
                    return Verdict(False, "answer_reachable_without_chain",
                                   f"answer {needle.strip()!r} visible on page {page!r} outside the chain")
        for source, target in pairwise(path):
            served = mask.render(self.pages[source])
            terms = mask.hidden_terms[target]
            pattern = re.compile("|".join(rf"(?<!\w){re.escape(t)}(?!\w)" for t in terms), re.IGNORECASE)
            if target not in served.links or not pattern.search(f"{served.title}\n{served.text}"):
                return Verdict(False, "chain_broken", f"page {source!r} does not show the link to {target!r}")
            finals = () if target == path[-1] else triple.answers
            if hop_statement(served, terms, finals) is None:
                return Verdict(False, "no_served_hop_statement",
                               f"no prose sentence on {source!r} as served names {target!r}"
                               + ("" if not finals else " without naming the answer"))
        if self.require_grounding:
            subject = self.pages[v0].title
            # a monarch is named "Elizabeth II" on the pages around "Elizabeth II of the United Kingdom"
            names = sorted({subject, short_name(subject)}, key=len, reverse=True)
            pattern = re.compile("|".join(rf"(?<!\w){re.escape(name)}(?!\w)" for name in names), re.IGNORECASE)
            if not any(pattern.search(mask.render(self.pages[p]).text) for p in path[1:]):
                return Verdict(False, "ungrounded_chain", f"no chain page mentions the subject {subject!r}")
        return ACCEPT
