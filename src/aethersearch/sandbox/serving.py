"""What the sandbox serves an agent: the snippet policy, the public view of a call, and hop statements.

Why one module: three places must agree byte for byte on what an agent was
shown -- the episode that serves it, the no-leak test that compares it with a
world where masked pages do not exist, and the factorised scorer that decides
which hops of a chain the agent was *told* (``diagnostics.factorised``). They all
call the functions below, so the rule lives in one place.

**Snippet policy** (WebDetective: search shows titles and snippets; a page's
facts are read by visiting it). A search hit is served as its id, title and url
plus a snippet of at most :data:`SNIPPET_SENTENCES` whole sentences of the page
*as the mask renders it for search* (``ChainMask.render_for_search``: also
without any sentence naming a page still locked in the episode, so a snippet of
``v(i-1)`` never names ``v(i)`` before ``v(i-1)`` was visited): the sentences sharing most query words (ties: earlier
first; none shared: the first sentence), in page order, each cut at the last
word boundary within :data:`SNIPPET_SENTENCE_CHARS` characters (a cut sentence
ends in `` ...``), and the mask applied again *after* the cut: a cut piece that
names a withheld or still-locked page by any of its terms is not served. (A cut
inside a word made a new name: "the European Union" cut after "Europe" printed
the locked page Europe; a cut at a word boundary cannot, and the second mask
pass makes sure whatever the cut.)
Search never serves links; only ``visit`` serves a page's full text and links,
and ``visit`` refuses a locked page. So a locked page's text is never served,
and an unlocked chain page's full text only by a visit the mask allows; a
snippet can state a hop (the sentence naming the next entity) only once that
entity is unlocked, which the scorer counts (judged from the served text,
replaying the visited set each search ran with).

**Public calls.** The action log keeps everything for scoring (masked ids
included, :attr:`records.ToolCall.suppressed_ids`); what the agent receives is
:func:`public_call`: the same record with ``suppressed_ids`` empty (and the HTTP
server drops the key altogether). A masked page is therefore indistinguishable
from a nonexistent one in every agent-facing response: same refusal text, same
result list, no ids, titles or counts of what was withheld. (Timing fields
``elapsed_s``/``started_at`` are wall-clock measurements and are not compared.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from aethersearch.records import Document, ToolCall
from aethersearch.sandbox.mask import ChainMask, mention_pattern, split_sentences

__all__ = ["PUBLIC_CALL_EXCLUDE", "SNIPPET_SENTENCES", "SNIPPET_SENTENCE_CHARS", "cut_sentence", "hop_statements",
    "public_call", "render_page", "route_statements", "search_hit", "sentences", "snippet", "states_hop"]

SNIPPET_SENTENCES = 2
SNIPPET_SENTENCE_CHARS = 240
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(("a", "an", "the", "of", "in", "on", "at", "to", "for", "and", "or", "is", "was", "were",
                   "are", "be", "by", "with", "from", "as", "what", "which", "who", "whom", "whose", "where",
                   "when", "how", "why", "did", "does", "do"))


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)} - _STOP


def sentences(text: str) -> list[str]:
    """The stripped, non-empty sentences of ``text`` (the mask's own sentence rule)."""
    return [s.strip() for s in split_sentences(text) if s.strip()]


def cut_sentence(sentence: str, limit: int = SNIPPET_SENTENCE_CHARS) -> str:
    """``sentence`` cut at the last word boundary within ``limit`` characters, with `` ...`` when cut.

    A cut never ends inside a word, so it never turns part of a longer word
    into a whole word of its own ("European" into "Europe").
    """
    if len(sentence) <= limit:
        return sentence
    head = sentence[:limit]
    if sentence[limit].isalnum() or sentence[limit] == "_":
        # inside a word: back to the last non-word character (a whole first word longer than the limit: nothing)
        head = head[: max((i for i, ch in enumerate(head) if not (ch.isalnum() or ch == "_")), default=-1) + 1]
    return head.rstrip() + " ..."


def snippet(text: str, query: str, withheld: Sequence[re.Pattern[str]] = ()) -> str:
    """The search snippet of a page text for ``query`` (see the module's snippet policy).

    ``withheld``: the mention patterns the snippet must not match, applied to
    each piece after its cut (``ChainMask.withheld_from_search``).
    """
    parts = sentences(text)
    if not parts:
        return ""
    terms = _words(query)
    scored = sorted(range(len(parts)), key=lambda i: (-len(terms & _words(parts[i])), i))
    chosen = [i for i in scored[:SNIPPET_SENTENCES] if terms & _words(parts[i])] or [0]
    cut = [cut_sentence(parts[i]) for i in sorted(chosen)]
    return " ".join(piece for piece in cut if not any(pattern.search(piece) for pattern in withheld))


def render_page(mask: ChainMask | None, doc: Document) -> Document:
    """A page as ``visit`` serves it: the mask's rendering (or the page itself without a mask)."""
    return doc if mask is None else mask.render(doc)


def search_hit(mask: ChainMask | None, doc: Document, query: str, visited: Iterable[str] = ()) -> Document:
    """A page as ``search`` serves it: id, title, url and a snippet of the search rendering; no links.

    ``visited``: the episode's visited pages when the search ran (default none:
    the strictest view); sentences naming a page still locked are not quoted.
    """
    if mask is None:
        return Document(id=doc.id, title=doc.title, url=doc.url, text=snippet(doc.text, query), links=[])
    page = mask.render_for_search(doc, visited)
    return Document(id=page.id, title=page.title, url=page.url, links=[],
                    text=snippet(page.text, query, mask.withheld_from_search(doc.id, visited)))


def public_call(call: ToolCall) -> ToolCall:
    """The agent-facing copy of a logged call: nothing about masked pages."""
    return call if not call.suppressed_ids else call.model_copy(update={"suppressed_ids": []})


PUBLIC_CALL_EXCLUDE = frozenset({"suppressed_ids"})


def hop_statements(mask: ChainMask, pages: Sequence[Document]) -> list[tuple[str, ...]]:
    """Per hop i (``v(i-1) -> v(i)``), the sentences of ``v(i-1)``'s served page that mention ``v(i)``.

    ``pages`` are the chain's pages ``v0..vn`` in path order. These sentences
    are the hop's evidence (WebDetective: the page of ``v(i-1)`` states the link
    to ``v(i)``); the mask keeps them only on ``v(i-1)`` (and ``v(i)`` itself).
    An empty tuple means the page states the hop only by its link.
    """
    if [p.id for p in pages] != list(mask.path):
        raise ValueError(f"hop_statements needs the chain's pages in path order {list(mask.path)}, "
                         f"got {[p.id for p in pages]}")
    return route_statements(mask, pages)


def route_statements(mask: ChainMask, pages: Sequence[Document]) -> list[tuple[str, ...]]:
    """Per hop of any route ``u0..um`` through the graph, the sentences of ``u(j-1)``'s served page naming ``u(j)``.

    The same rule as :func:`hop_statements`, for a route that may leave the
    question's chain (an alternative path): a masked page is named by its hidden
    terms, any other page by its title; pages are rendered as this question's
    mask serves them, so a sentence the mask withholds is never a statement.
    """
    out: list[tuple[str, ...]] = []
    for i in range(1, len(pages)):
        pattern = mask.pattern_of(pages[i].id) or mention_pattern([pages[i].title])
        text = render_page(mask, pages[i - 1]).text
        out.append(tuple(s for s in sentences(text) if pattern is not None and pattern.search(s)))
    return out


def states_hop(served_text: str, statements: Sequence[str]) -> bool:
    """Whether ``served_text`` contains one of a hop's statements in full."""
    return any(statement in served_text for statement in statements)
