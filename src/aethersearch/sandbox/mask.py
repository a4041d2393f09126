"""The mask policy of one question: which pages are locked, and what each served page withholds.

WebDetective's rule, for a question whose reasoning chain is the path
``v0 -> v1 -> ... -> vn`` (``vn`` = the answer's page):

* **Locking.** Every chain node after ``v0`` -- the intermediate pages
  ``v1..v(n-1)`` *and* the answer page ``vn`` -- is locked until the agent has
  visited its predecessor in the same episode: ``v_i discoverable <=>
  visited(v_(i-1))``. A locked page is absent from search results and ``visit``
  refuses it exactly as it refuses a page that does not exist (so the refusal
  itself leaks nothing about the chain). The answer page is locked too because
  otherwise a search for the subject's name would surface it directly (the
  answer page usually mentions the subject), which is the shortcut the chain
  exists to close. Unlocking is per episode; once unlocked a page stays open.
* **Masked mentions.** A chain node is visible only from its predecessor page,
  as in the paper: in the text served from any page other than ``v_(i-1)`` and
  ``v_i`` itself, every sentence that mentions ``v_i`` (its title, or for the
  answer page also any gold alias; case-insensitive, whole words) is withheld
  and the link to ``v_i`` is removed. For ``v0`` this is exactly the removal of
  the direct evidence: the sentence stating the answer and the direct link
  ``v0 -> vn`` are withheld, because ``v0`` is never ``vn``'s predecessor
  (paths have at least two hops). This holds for pages returned by search as
  well as by visit.
* **Snippets obey the lock too.** ``v_i`` is discoverable only once its
  predecessor was *visited*, so a search snippet of ``v_(i-1)``'s page must not
  name ``v_i`` before that visit: :meth:`ChainMask.render_for_search` also drops
  every sentence naming a page that is still locked in the episode (the page
  text a ``visit`` serves keeps them, as the paper's rule allows).

Everything else stays possible: any unmasked page can be searched for and
visited directly, and an alternative route an agent finds is its own business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aethersearch.errors import DataError
from aethersearch.records import Document

__all__ = ["ChainMask", "drop_sentences", "mention_pattern", "split_sentences"]

# A sentence ends at . ! ? followed by whitespace, or at a line break; lines
# without final punctuation (infobox rows, headings) count as sentences.
_SENTENCE = re.compile(r"[^\n.!?]*(?:[.!?]+(?=\s|$)|[.!?]+|\n|$)")


def mention_pattern(terms: Iterable[str]) -> re.Pattern[str] | None:
    """Whole-word, case-insensitive pattern of any of ``terms`` (``None`` for no terms): what counts as a mention."""
    cleaned = sorted({t.strip() for t in terms if t and t.strip()}, key=lambda t: (-len(t), t))
    if not cleaned:
        return None
    body = "|".join(re.escape(term).replace(r"\ ", r"[\s_]+") for term in cleaned)
    return re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE)


_term_pattern = mention_pattern


def split_sentences(text: str) -> list[str]:
    """The sentence pieces the mask drops or keeps; ``"".join`` of them is ``text`` again."""
    return [m.group(0) for m in _SENTENCE.finditer(text) if m.group(0)]


def drop_sentences(text: str, pattern: re.Pattern[str]) -> str:
    """``text`` with every sentence matching ``pattern`` removed (other text kept byte for byte)."""
    if not pattern.search(text):
        return text
    kept: list[str] = []
    for match in _SENTENCE.finditer(text):
        piece = match.group(0)
        if piece and not pattern.search(piece):
            kept.append(piece)
    return "".join(kept)


class ChainMask:
    """Immutable mask of one question's chain; shared by all of its episodes.

    ``path`` is ``[v0, ..., vn]``; ``hidden_terms`` maps each masked page
    (``v1..vn``) to the surface forms whose mention is withheld off its
    predecessor page (its title at least).
    """

    __slots__ = ("_patterns", "hidden_terms", "path", "predecessor")

    def __init__(self, path: Sequence[str], hidden_terms: Mapping[str, Sequence[str]]) -> None:
        if len(path) < 3:
            raise ValueError(f"a masked chain needs at least two hops, got path {list(path)}")
        if len(set(path)) != len(path):
            raise ValueError(f"a chain path must not repeat a page: {list(path)}")
        self.path: tuple[str, ...] = tuple(path)
        self.predecessor: dict[str, str] = {path[i]: path[i - 1] for i in range(1, len(path))}
        self.hidden_terms: dict[str, tuple[str, ...]] = {
            page: tuple(dict.fromkeys(hidden_terms.get(page, ()))) for page in self.path[1:]
        }
        for page, terms in self.hidden_terms.items():
            if not terms:
                raise ValueError(f"masked page {page!r} has no hidden terms (give at least its title)")
        self._patterns: dict[str, re.Pattern[str] | None] = {
            page: _term_pattern(terms) for page, terms in self.hidden_terms.items()
        }

    @property
    def masked(self) -> tuple[str, ...]:
        """The masked pages ``v1..vn`` in chain order."""
        return self.path[1:]

    def is_locked(self, page: str, visited: Iterable[str] | set[str]) -> bool:
        """Whether ``page`` is still hidden given the pages visited so far in the episode."""
        pred = self.predecessor.get(page)
        return pred is not None and pred not in visited

    def pattern_of(self, page: str) -> re.Pattern[str] | None:
        """The mention pattern of masked page ``page`` (its hidden terms), ``None`` if it has none."""
        return self._patterns.get(page)

    def patterns_for(self, page: str) -> list[re.Pattern[str]]:
        """The mention patterns withheld from ``page``'s text (masked pages it is not the predecessor of)."""
        return [pattern for masked, pattern in self._patterns.items()
                if pattern is not None and page not in (masked, self.predecessor[masked])]

    def render(self, doc: Document) -> Document:
        """The page as the sandbox serves it: masked mentions and links withheld (see module doc)."""
        text = doc.text
        links = list(doc.links)
        for page, pattern in self._patterns.items():
            if doc.id in (page, self.predecessor[page]):
                continue
            if pattern is not None:
                text = drop_sentences(text, pattern)
            if page in links:
                links = [link for link in links if link != page]
        if text is doc.text and links == doc.links:
            return doc
        return doc.model_copy(update={"text": text, "links": links})

    def withheld_from_search(self, page: str, visited: Iterable[str]) -> list[re.Pattern[str]]:
        """Every mention pattern a search snippet of ``page`` must not match: those :meth:`render` withholds
        from it, and those of the pages still locked given ``visited``."""
        seen = set(visited)
        out = self.patterns_for(page)
        out += [pattern for masked, pattern in self._patterns.items()
                if pattern is not None and pattern not in out and self.is_locked(masked, seen)]
        return out

    def render_for_search(self, doc: Document, visited: Iterable[str]) -> Document:
        """The page as a search snippet may quote it: :meth:`render`, less sentences naming a still-locked page.

        ``visited`` is the episode's visited set *at the time of the search*
        (the scorer replays it from the trace, so its account agrees).
        """
        page = self.render(doc)
        seen = set(visited)
        for masked, pattern in self._patterns.items():
            if pattern is not None and self.is_locked(masked, seen):
                text = drop_sentences(page.text, pattern)
                if text != page.text:
                    page = page.model_copy(update={"text": text})
        return page

    def to_json(self) -> dict[str, Any]:
        """The mask as stored in a release's diagnostics row (``extra["mask"]``)."""
        return {"path": list(self.path), "hidden_terms": {k: list(v) for k, v in self.hidden_terms.items()}}

    @classmethod
    def from_json(cls, value: Any, *, origin: str = "<mask>", line: int | None = None) -> ChainMask:
        """Parse :meth:`to_json` output; malformed input is a DataError naming ``origin``/``line``."""
        try:
            path = [str(p) for p in value["path"]]
            terms = {str(k): [str(t) for t in v] for k, v in value["hidden_terms"].items()}
            return cls(path, terms)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise DataError(origin, f"invalid chain mask: {exc}", line=line, field="extra.mask",
                            fix='expected {"path": [v0, ..., vn], "hidden_terms": {page: [terms]}}') from None
