"""Wikitext -> plain page text and outgoing link titles, with ``wikitextparser``.

Why wikitextparser and not mwparserfromhell: on the real enwiki excerpt
(106 articles, 5.7 MB of wikitext) ``wikitextparser``'s ``plain_text`` converted
about twice as many pages per second as ``mwparserfromhell``'s ``strip_code``
(``benchmarks/wikipedia_build.py --compare`` prints both side by side),
and one parse gives both the text and every wikilink, including links nested in
templates, infoboxes and image captions, which WebDetective's graph
needs (an infobox's ``| spouse = [[...]]`` is a hop). Comments are not links.

Conventions of this module (one place, used by the importer and its tests):

* a link target is normalised as MediaWiki does for a first-letter wiki:
  ``#section`` dropped, ``_`` read as a space, whitespace collapsed, the first
  letter upper-cased; a leading ``:`` is dropped;
* a target whose prefix before ``:`` is a namespace of the wiki (``File:``,
  ``Category:``, ``Template:``...) or an interlanguage/interwiki code (lower case,
  ``fr:``, ``wikt:``) is not an article link; it is dropped from the links and
  from the text (a category line is not prose);
* formulas (``<math>``) are cut, and references (``<ref>...</ref>``) with their links: a citation is not
  text an agent reads as a hop, and the page text and its links must agree;
* a page is a disambiguation page when it transcludes a template of the
  :data:`DISAMBIGUATION_TEMPLATES` family, as Wikipedia's own
  ``Category:Disambiguation pages`` is filled.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Collection
from typing import NamedTuple

import wikitextparser

from aethersearch.corpus.infobox import InfoboxRow, infobox_rows
from aethersearch.corpus.titles import article_target, normalize_title

#: template names (lower case) that mark a disambiguation page, besides any name *ending* in "disambiguation"
#: ("Airport disambiguation"); "Disambiguation needed" is an inline cleanup tag on ordinary articles
DISAMBIGUATION_TEMPLATES = frozenset({
    "disambig", "dab", "disamb", "hndis", "geodis", "numberdis", "schooldis", "hospitaldis", "mathdab",
    "letter-numbercombdisambig", "roaddis",
})

#: a heading line, matched from the newline before it (the text gets one in front): the literal prefix lets the
#: engine jump between candidates, where a multi-line ``^`` is tried at every position of the page (half of
#: :func:`_tidy`'s time on a generated page: about 20 us of 1.6 KB). A match ends before a newline or at the end, so
#: the newline before the next heading is never taken by the one before it
_HEADING = re.compile(r"\n(=={0,5})\s*(.*?)\s*\1\s*$", re.MULTILINE)
#: three or more newlines: a literal prefix lets the engine skip to candidates (``\n{3,}`` tries every newline)
_BLANK_RUN = re.compile(r"\n\n\n+")
#: runs of two spaces or more (tabs and no-break spaces are made spaces first, by ``str.replace``: the one
#: pattern for all three, ``[\t\u00a0][ \t\u00a0]*| [ \t\u00a0]+``, has no literal prefix and was 70% of
#: ``_tidy`` on the real excerpt, where ``&nbsp;`` puts a no-break space in two pages of three)
_DOUBLE_SPACES = re.compile(r"  +")
#: two or more quotes, written so it starts with a literal: ``'{2,}`` has no literal prefix, so the engine tried it
#: at every character of the page (23 us a generated page, against 1)
_EMPHASIS = re.compile(r"''+")


class ParsedPage(NamedTuple):
    """Plain text, normalised link titles (first appearance order, no repeats), the disambiguation flag and
    the typed infobox rows (:mod:`aethersearch.corpus.infobox`; their targets are among ``links``)."""

    text: str
    links: list[str]
    disambiguation: bool
    infobox: list[InfoboxRow] = []


def is_disambiguation(template_names: Collection[str]) -> bool:
    """Whether a page transcluding these (normalised, any case) templates is a disambiguation page."""
    return any(name.endswith("disambiguation") or name in DISAMBIGUATION_TEMPLATES
               for name in (n.strip().lower() for n in template_names))


def _tidy(text: str) -> str:
    """Headings as plain lines, runs of spaces as one, every line stripped, blank runs as one blank line.

    Each step runs only when its marker is in the text, tabs and no-break spaces become spaces and runs of
    spaces take a literal-prefix pattern, and lines are stripped by ``str.strip`` (the whitespace ``[^\\S\\n]`` matches):
    the whole-text regexes that define the step would be a third of the parse of a generated page.
    ``tests/corpus/test_wikitext_tidy.py`` checks it against those regexes.
    """
    if "=" in text:
        text = _HEADING.sub(lambda m: "\n" + m.group(2), "\n" + text)[1:]  # a template ("\\n\\2") is slower
    if "\t" in text:
        text = text.replace("\t", " ")
    if "\u00a0" in text:
        text = text.replace("\u00a0", " ")
    if "  " in text:
        text = _DOUBLE_SPACES.sub(" ", text)
    text = "\n".join([line.strip() for line in text.split("\n")])
    if "\n\n\n" in text:
        text = _BLANK_RUN.sub("\n\n", text)
    return text.strip()


#: comments (to the end when unclosed, as MediaWiki reads them), references and formulas (TeX is not prose).
#: Each body is a possessive run that stops only where its closing tag starts: what a lazy ``.*?`` before the
#: closing tag matches, without trying the closing tag at every character (9 us a generated page, not 20)
_NOT_PROSE_TAGS = re.compile(r"<!--(?:[^-]++|-(?!->))*+(?:-->|\Z)|<ref\b[^>]*/>|<ref\b[^>]*+>(?:[^<]++|<(?!/ref\s*>))*+"
                             r"</ref\s*>|<math\b[^>]*+>(?:[^<]++|<(?!/math\s*>))*+</math\s*>")


@functools.lru_cache(maxsize=8)
def _not_prose_links(namespaces: frozenset[str]) -> re.Pattern[str]:
    """Namespaced or interlanguage links without nested links (category lines, ``[[fr:...]]``)."""
    prefixes = "|".join(sorted((re.escape(n) for n in namespaces), key=len, reverse=True))
    return re.compile(rf"\[\[\s*(?:(?i:{prefixes})|[a-z][a-z-]{{1,11}})\s*:[^\[\]]*\]\]")


def cut_not_prose(wikitext: str, namespaces: frozenset[str]) -> str:
    """``wikitext`` without comments, references, formulas and namespaced or interlanguage links.

    Exactly what one substitution of ``tags|links`` gives (leftmost match first, the scan going on after
    it), from two patterns searched in turn: each starts with one literal character, which the engine
    finds at memchr speed, while one pattern starting with ``<`` or ``[`` tests every character against
    that set (about 10 ns a character, half the cut's cost). ``tests/corpus/test_wikitext_cut.py`` holds
    it to the one-pattern definition.
    """
    links_pattern = _not_prose_links(namespaces)
    tag, link = _NOT_PROSE_TAGS.search(wikitext), links_pattern.search(wikitext)
    kept: list[str] = []
    position = 0
    while True:
        if tag is not None and (link is None or tag.start() < link.start()):
            match = tag
        elif link is not None:
            match = link
        else:
            break
        kept.append(wikitext[position:match.start()])
        position = match.end()
        # a match already found further on is still the next one from here; one the cut overlaps is not
        if tag is not None and tag.start() < position:
            tag = _NOT_PROSE_TAGS.search(wikitext, position)
        if link is not None and link.start() < position:
            link = links_pattern.search(wikitext, position)
    kept.append(wikitext[position:])
    return "".join(kept)


#: pieces of a paragraph the parser is not needed for: a plain wikilink ``[[target]]`` / ``[[target|text]]``
#: (no namespace colon, no nesting, no empty pipe-trick text); a template ``{{name|args}}`` whose arguments hold
#: words, plain links, ``<br>`` and templates of their own without braces inside (``plain_text`` drops a
#: template whole; its links stay links); an image ``[[File:x.jpg|...]]`` whose caption holds only words,
#: plain links and such templates (dropped whole, its caption's links stay links); a formatting tag pair
#: without tags inside (``<sup>``, ``<small>`` ...: the markup goes, the words stay), ``<br>``; an external
#: link ``[https://... text]`` (its text stays)
_PLAIN = r"\[\[[^\[\]{}<>&|:\n]++(?:\|[^\[\]{}<>&|\n]++)?\]\]"
_BREAK = r"<br\s*/?>"
#: a template's name: not empty, on one line (then spaces), no link, brace or tag in it (``{{}}``, ``{{|x}}``,
#: ``{{a [[b]]}}`` and ``{{a\n! b}}`` are text to the parser); its arguments follow a "|"
_NAMED = r"\{\{\s*+[^\s{}\[\]<>|][^{}\[\]<>|\n]*+\s*+"
_INNER = _NAMED + r"(?:\|(?:[^{}\[\]<>]++|" + _PLAIN + "|" + _BREAK + r")*+)?\}\}"
_TEMPLATE = _NAMED + r"(?:\|(?:[^{}\[\]<>]++|" + _PLAIN + "|" + _BREAK + "|" + _INNER + r")*+)?\}\}"
#: file extensions wikitextparser's ``plain_text`` reads as an image (a subset of its ``KNOWN_FILE_EXTENSIONS``)
_IMAGE_EXTENSIONS = "jpe?g|png|gif|svg|tiff?|ogg|ogv|oga|webm|pdf|djvu|mp3"
_IMAGE = (r"\[\[[^\[\]{}<>|:\s][^\[\]{}<>|:\n]*+:[^\[\]{}<>|:\n]*\.(?i:" + _IMAGE_EXTENSIONS + r")"
          r"(?:\|(?:[^\[\]{}<>]++|" + _PLAIN + "|" + _TEMPLATE + r")*+)?\]\]")
_FORMATTING = "sup|sub|small|big|u|s|del|ins"
#: one alternative per tag, without a capturing group or a back-reference: CPython 3.11's ``re`` raises
#: "The span of capturing group is wrong" for a group inside a possessive repeat (``<sup>x</sup><br>``)
_TAG_PAIR = "|".join(rf"<{tag}(?:\s[^<>/]*+)?>(?:[^\[\]{{}}<>|\n]++|{_PLAIN})*+</{tag}>"
                     for tag in _FORMATTING.split("|"))
_EXTERNAL = r"\[https?://[^\s\[\]<>{}\"|]++(?: [^\[\]<>{}\n]*+)?\]"
#: a paragraph the parser is not needed for: words, headings, list and indented lines, emphasis quotes, HTML
#: entities and the pieces above; any other tag, a deeper template, a table, a magic word or a table-like
#: line (``|``, ``!``) sends it to the parser. Templates, entities, tags, external links and captioned images
#: are in most paragraphs of real prose (``{{convert}}``, ``&nbsp;``, ``<sup>``): without them 30% of the real
#: excerpt's wikitext took this path, and the parse ran at half wikiextractor's speed
_SIMPLE_PARAGRAPH = re.compile(r"(?![|!])(?:[^\[\]{}<>|:\n_]++|_(?!_)|:(?!//)|\n(?![|!])|" + _PLAIN + "|"
                               + _TEMPLATE + "|" + _IMAGE + "|" + _TAG_PAIR + "|" + _BREAK + "|" + _EXTERNAL + ")*+")
#: what a simple paragraph drops whole: its templates, and its images (two patterns, each starting with a
#: literal the engine skips to; one pattern of both tested every character)
_TEMPLATES = re.compile(_TEMPLATE)
_IMAGES = re.compile(_IMAGE)
_TEMPLATE_NAME = re.compile(r"\{\{([^{}\[\]<>|]*+)")
_TAG_MARKUP = re.compile(r"</?(?:" + _FORMATTING + r")\b[^<>]*+>|" + _BREAK)
#: an external link and its text (group 1), alone: the group is why it is not the grammar's own piece
_EXTERNAL_LINK = re.compile(r"\[https?://[^\s\[\]<>{}\"|]++(?: ([^\[\]<>{}\n]*+))?\]")
#: a plain link, its target and (when piped) its shown text, as ``re.split`` groups
_PLAIN_LINK = re.compile(r"\[\[([^\[\]|]+)(?:\|([^\[\]|]+))?\]\]")
_LINK_TARGET = re.compile(r"\[\[([^\[\]|]+)")
#: what :func:`article_target` changes or drops in raw link targets joined by "|" (a title holds no "|"), in
#: checks that each scan for one literal or one character class (one pattern of five alternatives cost
#: 57 us per 20 targets, most of the fast path): a target not starting with an ASCII capital or digit (a
#: lower-case first letter is upper-cased; other first characters are left to the exact rule); "#", "_",
#: ":", "{" or "<", or ASCII whitespace other than a space (``str.isspace``: tab, newlines, \x0b, \x0c,
#: \x1c-\x1f); two spaces or a space at a target's end (plain ``in`` tests); and, in non-ASCII targets
#: only, any other whitespace (``[^\S ]``: ``\s`` is ``str.isspace``, what ``str.split`` splits on)
_NOT_TITLE_START = re.compile(r"\|[^A-Z0-9]")
_NOT_TITLE_CHARACTER = re.compile(r"[#_:{<\t\n\x0b\x0c\r\x1c-\x1f]")
_NON_SPACE_WHITESPACE = re.compile(r"[^\S ]")
#: markup that opens or closes a block the parser must see whole (templates, tables, tags; a tag's name is group 1).
#: A tag opens one only when it is whole and neither self-closing (``<ref name=x />``) nor void (``<br>``,
#: ``<hr>``), and only when its closing tag follows somewhere on the page; a closing tag closes one only when
#: its opening tag came before (:func:`_tag_pairs`). Counted as blocks, one ``<br>``, ``<center>`` or ``<li>``
#: with no closing tag left every later paragraph of its page to the parser (two of the real excerpt's
#: pages whole, and a third of its plain prose)
#: Links count too (an image's caption may run over a blank line), and a table's end only where a table ends,
#: at the start of a line ("word |}" leaves the table open)
_OPENERS = re.compile(r"\{\{|\{\||\[\[|<(?!(?i:br|hr|wbr)\b)([A-Za-z][\w-]*+)[^<>]*+(?<!/)>")
_CLOSERS = re.compile(r"\}\}|(?m:^[ \t]*+)\|\}|\]\]|</([A-Za-z][\w-]*+)")
#: the same without links, for a paragraph whose links all close in it (most: counting them cost a third
#: of the split), found by dropping innermost links twice (:data:`_LINK_PAIR`)
_OPENERS_BUT_LINKS = re.compile(r"\{\{|\{\||<(?!(?i:br|hr|wbr)\b)([A-Za-z][\w-]*+)[^<>]*+(?<!/)>")
_CLOSERS_BUT_LINKS = re.compile(r"\}\}|(?m:^[ \t]*+)\|\}|</([A-Za-z][\w-]*+)")
_LINK_PAIR = re.compile(r"\[\[[^\[\]]*+\]\]")


@functools.lru_cache(maxsize=256)
def _tag_pattern(name: str, closing: bool) -> re.Pattern[str]:
    return re.compile(("</" if closing else "<") + re.escape(name) + r"(?![\w-])", re.IGNORECASE)


def _block_kind(mark: str, name: str | None) -> str:
    """What a block mark opens or closes: a template, a table, a link, or a tag of its name."""
    if name is not None:
        return "<" + name.lower()
    return {"{{": "{{", "}}": "{{", "{|": "{|", "]]": "[[", "[[": "[["}.get(mark, "{|")  # "|}" after spaces


def _blocks(open_blocks: dict[str, int], paragraph: str, page: str, at: int) -> None:
    """Count the blocks the paragraph (at offset ``at`` of ``page``) opens and closes into ``open_blocks`` (open
    ones by kind), in page order: a closer closes only an open block of its own kind ("|}" then "{|" leaves a
    table open; "]]" closes no table)."""
    openers, closers = _OPENERS, _CLOSERS
    if not open_blocks.get("[["):
        inner = _LINK_PAIR.sub("", _LINK_PAIR.sub("", paragraph)) if "[[" in paragraph else paragraph
        if "[[" not in inner and "]]" not in inner:
            openers, closers = _OPENERS_BUT_LINKS, _CLOSERS_BUT_LINKS
    marks = [(found.start(), 1, found) for found in openers.finditer(paragraph)]
    marks += [(found.start(), -1, found) for found in closers.finditer(paragraph)]
    for _, step, found in sorted(marks, key=lambda mark: mark[0]):
        name = found.group(1)
        if name is not None:  # a tag counts when its pair is on the page (after an opener, before a closer)
            pair = _tag_pattern(name, step > 0)
            if (pair.search(page, at + found.end()) if step > 0 else pair.search(page, 0, at + found.start())) is None:
                continue
        kind = _block_kind(found.group().strip(" \t"), name)
        open_blocks[kind] = max(0, open_blocks.get(kind, 0) + step)


def _segments(wikitext: str) -> list[tuple[bool, str]]:
    """``(simple, text)`` runs of whole paragraphs, in order: a paragraph is simple when it matches
    :data:`_SIMPLE_PARAGRAPH` and no template, table or tag opened before it is still open; consecutive
    paragraphs that are not simple are joined, so the parser sees every block it must parse whole.
    A run is joined once at its end (appending to a growing string copied a page of 750 paragraphs
    quadratically)."""
    runs: list[tuple[bool, list[str]]] = []
    open_blocks: dict[str, int] = {}
    at = 0
    for paragraph in wikitext.split("\n\n"):
        simple = not any(open_blocks.values()) and _SIMPLE_PARAGRAPH.fullmatch(paragraph) is not None
        if not simple:
            _blocks(open_blocks, paragraph, wikitext, at)
        at += len(paragraph) + 2
        if runs and runs[-1][0] == simple:
            runs[-1][1].append(paragraph)
        else:
            runs.append((simple, [paragraph]))
    return [(simple, "\n\n".join(paragraphs)) for simple, paragraphs in runs]


def _simple_text(paragraphs: str, namespaces: frozenset[str], links: dict[str, None]) -> str | None:
    """What wikitextparser's ``plain_text`` gives for simple paragraphs, or ``None`` when they name a
    template of the disambiguation family (the parser then reads them, and the page's flag, exactly).

    Flat templates are dropped first (``plain_text`` drops them whole). Then every ``[[``, ``|`` and ``]]``
    belongs to a plain link, so one ``split`` on :data:`_PLAIN_LINK` gives the text between links, each
    link's target and its shown text (``None`` when unpiped); the text is put back together from those
    pieces (a find-all, a substitution and two replacements did it in three passes over the page), and its
    HTML entities are unescaped last, as ``plain_text`` does."""
    if "{{" in paragraphs \
            and is_disambiguation([_template_name(name) for name in _TEMPLATE_NAME.findall(paragraphs)]):
        return None
    linked = False
    if "{{" in paragraphs or (":" in paragraphs and "[[" in paragraphs):
        kept = _TEMPLATES.sub("", paragraphs) if "{{" in paragraphs else paragraphs
        if ":" in kept and "[[" in kept:
            kept = _IMAGES.sub("", kept)
        if kept != paragraphs:
            if "[[" in paragraphs:  # every link in order, those in the templates and images too
                add_link_targets(_LINK_TARGET.findall(paragraphs), namespaces, links)
                linked = True
            paragraphs = kept
    if "<" in paragraphs:
        paragraphs = _TAG_MARKUP.sub("", paragraphs)
    if "[http" in paragraphs:
        paragraphs = _EXTERNAL_LINK.sub(lambda link: link.group(1) or "", paragraphs)
    pieces = _PLAIN_LINK.split(paragraphs)
    if len(pieces) > 1:
        targets = pieces[1::3]
        if not linked:
            add_link_targets(targets, namespaces, links)
        pieces[1::3] = [target if shown is None else shown
                        for target, shown in zip(targets, pieces[2::3], strict=True)]
        del pieces[2::3]
        paragraphs = "".join(pieces)
    return html.unescape(paragraphs) if "&" in paragraphs else paragraphs


def _already_titles(joined: str) -> bool:
    """Whether every target of ``joined`` (raw targets joined by "|") is its own article title."""
    if (_NOT_TITLE_START.search("|" + joined) or _NOT_TITLE_CHARACTER.search(joined) or "  " in joined
            or " |" in joined or joined.endswith(" ")):
        return False
    return joined.isascii() or _NON_SPACE_WHITESPACE.search(joined) is None


def add_link_targets(raw_targets: list[str], namespaces: frozenset[str], links: dict[str, None]) -> None:
    """Add the article each raw link target names to ``links`` (first appearance order, no repeats).

    Most targets already are their article's title (``[[Ancient Egypt]]``): when :func:`_already_titles`
    finds nothing in them that :func:`article_target` would change, they are added as they are; otherwise
    each goes through :func:`article_target`. Why: on a dump of a million articles its cache stops holding
    the popular targets, and a cache miss cost more than the rest of the paragraph's fast path. A target
    whose first letter is ASCII lower case (``[[philosophy]]``, a quarter of the real excerpt's targets) is
    checked with that letter upper-cased, which is all the rule changes in it when the rest is clean.
    """
    if _already_titles("|".join(raw_targets)):
        links.update(dict.fromkeys(raw_targets))
        return
    titled = [raw[0].upper() + raw[1:] if "a" <= raw[:1] <= "z" else raw for raw in raw_targets]
    if _already_titles("|".join(titled)):
        links.update(dict.fromkeys(titled))
        return
    for raw in raw_targets:
        target = article_target(raw, namespaces)
        if target is not None:
            links.setdefault(target, None)


#: a segment that is one template and nothing else, whose arguments hold only words and plain wikilinks (a
#: flat infobox): its links and name are read without the parser, which cost about 100 us a page on one
_FLAT_TEMPLATE = re.compile(r"\{\{(\s*+[^{}|<>\[\]\n]+\s*+)((?:\|(?:[^{}\[\]<>|]++|\[\[[^\[\]{}<>|]+(?:\|[^\[\]{}<>|]*)?\]\])*+)*+)\}\}")


#: what every bracketed external link starts with (wikitextparser's schemes are letters then ":" or "://", or "//")
_BRACKET_SCHEME = re.compile(r"\[(?:[A-Za-z][A-Za-z0-9+.-]*+:|//)")


@functools.lru_cache(maxsize=1 << 12)
def _template_name(raw: str) -> str:
    """wikitextparser's ``normal_name`` of a template named ``raw`` (names repeat: an infobox kind per page)."""
    return str(wikitextparser.Template("{{" + raw + "}}").normal_name())


#: a link of a table segment, for :func:`_table_cells_read`: not inside brackets of its own ("[[[x]]]"), no
#: nesting, a target (any, ":" and "&" too) and an optional text (no "|"); the target's text (as written,
#: "#section" too) or the text is what ``plain_text`` leaves of it, unless the target names a file
_TABLE_LINK = re.compile(r"(?<!\[)\[\[([^\[\]{}<>|\n]++)(?:\|([^\[\]{}<>|\n]++))?\]\](?!\])")
_FILE_LIKE = re.compile(r":[^.]*\.")
_TABLE_MARK = re.compile(r"\{\||\|\}")
#: a tag other than the HTML tags whose content the parser reads as wikitext (``<nowiki>``, ``<pre>``,
#: ``<gallery>``, ``<poem>`` and the other extension tags read their content their own way)
_NOT_HTML_TAG = re.compile(r"</?(?!(?:br|hr|wbr|small|big|sup|sub|span|div|center|font|s|u|i|b|del|ins|abbr|code|tt|p|"
                           r"li|ol|ul|dl|dt|dd|table|tr|td|th|caption|blockquote|cite|q|var|kbd|samp|em|strong|"
                           r"strike|bdi|bdo|mark|ruby|rb|rp|rt|time|data)(?![\w-]))[A-Za-z]", re.IGNORECASE)


def _table_cells_read(wikitext: str, namespaces: frozenset[str], links: dict[str, None]) -> str | None:
    """A segment holding a table, with its links and templates already read, or ``None`` when they are not all
    plain (then the parser reads them, and nothing is added).

    ``plain_text`` replaces each link by its text and drops each template before it renders a table, and it
    renders the table from that replaced text: so when every ``[[`` starts a plain link and every ``{{`` a
    template of :data:`_TEMPLATE` (and none names a disambiguation template), doing those replacements
    first gives the parser the same tables with none of those spans to find, shadow and replace (on the real
    excerpt's tables, most of their links and templates). The links, those in templates too, are added in
    page order.
    """
    if ("<" in wikitext and _NOT_HTML_TAG.search(wikitext)) or not _tables_closed(wikitext):
        return None  # an extension tag, or a table left open (the parser reads "{|" so as text or as a table)
    if "{{" in wikitext:
        if "{{{" in wikitext or is_disambiguation([_template_name(n) for n in _TEMPLATE_NAME.findall(wikitext)]):
            return None  # a parameter, or a template whose name the flag needs exactly
        without = _without_templates(wikitext)
        for _ in range(2):  # innermost first: a template holding deeper ones is one once they are dropped
            if without is None or "{{" not in without:
                break
            without = _without_templates(without)
        # what is left may not join into a template's braces either ("{" "{{x}}" "{")
        if without is None or "{{" in without or "}}" in without:
            return None
        read = without
    else:
        read = wikitext
    if "[[" in wikitext:
        replaced = _TABLE_LINK.sub(_link_text, read)
        if "[[" in replaced or "]]" in replaced:
            return None
        add_link_targets(_LINK_TARGET.findall(wikitext), namespaces, links)
        read = replaced
    return read


def _tables_closed(text: str) -> bool:
    """Whether every "{|" of ``text`` is closed by a "|}" after it, and every "|}" closes one."""
    depth = 0
    for mark in _TABLE_MARK.finditer(text):
        depth += 1 if mark.group() == "{|" else -1
        if depth < 0:
            return False
    return depth == 0


def _link_text(link: re.Match[str]) -> str:
    """What ``plain_text`` leaves of a link (its text, else its target as written); a target that may name a
    file (a "." after a ":": ``plain_text`` drops such a link whole) is left in place, for the parser."""
    target, text = link.group(1), link.group(2)
    if _FILE_LIKE.search(target) and not target.startswith(":"):
        return link.group(0)
    return target if text is None else text


def _without_templates(text: str) -> str | None:
    """``text`` with its templates (:data:`_TEMPLATE`) dropped, or ``None`` when dropping one would make a
    table's start or end: the text either side joining into "{|" or "|}", or one of them then starting its
    line after spaces or colons ("{{x}} {|"), as the text left so far reads."""
    kept: list[str] = []
    line = ""  # the text left so far on the current line
    at = 0
    for found in _TEMPLATES.finditer(text):
        piece = text[at:found.start()]
        kept.append(piece)
        line = piece.rpartition("\n")[2] if "\n" in piece else line + piece
        after = text[found.end():found.end() + 2]
        if (line[-1:] in ("{", "|") and after[:1] in ("|", "}")) or (
                not line.strip(" \t:") and text[found.end():found.end() + 64].lstrip(" \t:").startswith(("{|", "|}"))):
            return None
        at = found.end()
    kept.append(text[at:])
    return "".join(kept)


def _parsed_text(wikitext: str, namespaces: frozenset[str], links: dict[str, None],
                 templates: list[str], *, flat_templates: bool = True) -> str:
    flat = _FLAT_TEMPLATE.fullmatch(wikitext.rstrip()) if flat_templates else None
    if flat is not None:  # what the parser gives for it: its links in order, its name, and no text
        add_link_targets(_LINK_TARGET.findall(flat.group(2)), namespaces, links)
        templates.append(_template_name(flat.group(1)))
        return ""
    if flat_templates and "{|" in wikitext:
        read = _table_cells_read(wikitext, namespaces, links)
        if read is not None:
            return str(wikitextparser.parse(read).plain_text(
                replace_bolds_and_italics=False, _is_root_node=True,
                replace_external_links=_BRACKET_SCHEME.search(read) is not None))
    parsed = wikitextparser.parse(wikitext)
    # every link, those nested in templates, infoboxes and captions too. The target is the span's text up to
    # the first "|" (a title holds no "|"); reading it so skips the regex match wikitextparser's ``title``
    # property runs on every access (a fifth of the parse)
    add_link_targets([link.string[2:-2].partition("|")[0] for link in parsed.wikilinks], namespaces, links)
    found = parsed.templates
    templates.extend(t.normal_name() for t in found)
    if found and found[0].span == (0, len(wikitext.rstrip())):
        return ""  # the segment is one template (an infobox): plain_text drops it whole, so skip that pass
    # bold/italic quote runs are dropped by a regex afterwards: wikitextparser's own pass pairs them up, which
    # is a third of plain_text's cost, and an agent reads the words, not the emphasis
    # ``_is_root_node``: the parse is the root, as in wikitextparser's own ``remove_markup``, so ``plain_text`` reads it
    # in place instead of copying every span first (a tenth of the parser's time on the real excerpt)
    # ``replace_external_links``: its pass builds a shadow of the whole segment and scans it (a fifth of
    # ``plain_text`` on the real excerpt's tables); it changes only bracketed links, each "[" then a URL scheme
    # ("http://", "mailto:", "//" ...), so a segment with no "[" before "letters:" or "//" skips it
    return str(parsed.plain_text(replace_bolds_and_italics=False, _is_root_node=True,
                                 replace_external_links=_BRACKET_SCHEME.search(wikitext) is not None))


def parse_wikitext(wikitext: str, namespaces: frozenset[str], *, fast_path: bool = True) -> ParsedPage:
    """Plain text and article links of one page's wikitext (see the module docstring for the rules).

    References and category/interlanguage links are cut before parsing: they
    are not prose, and cutting them in the parsed tree costs one tree update
    each (four times the whole parse on the real excerpt). Then only what needs
    the parser goes to it: paragraphs of plain words and plain links (most
    prose) take a fast path (:func:`_segments`) that gives exactly what
    ``plain_text`` gives for them, and so does a segment that is one flat template
    (:data:`_FLAT_TEMPLATE`) -- ``fast_path=False`` parses everything, and
    ``tests/corpus/test_wikitext_fast_path.py`` checks both agree on every
    page of the real enwiki excerpts; the parse was 85-90% of the import's CPU.
    """
    links: dict[str, None] = {}
    templates: list[str] = []
    cut = cut_not_prose(wikitext, namespaces)
    if fast_path:
        texts: list[str] = []
        for simple, part in _join_marks(_segments(cut)):
            fast = _simple_text(part, namespaces, links) if simple else None
            texts.append(_parsed_text(part, namespaces, links, templates) if fast is None else fast)
        text = "".join(texts)
    else:
        text = _parsed_text(cut, namespaces, links, templates, flat_templates=False)
    if "''" in text:
        text = _EMPHASIS.sub("", text)
    rows = infobox_rows(cut, namespaces) if "nfobox" in cut else []
    return ParsedPage(_tidy(text), list(links), is_disambiguation(templates), rows)


def _join_marks(segments: list[tuple[bool, str]]) -> list[tuple[bool, str]]:
    """The segments with the paragraph breaks between them restored (each but the last ends in a blank line)."""
    return [(simple, part + "\n\n" if i < len(segments) - 1 else part)
            for i, (simple, part) in enumerate(segments)]


__all__ = ["DISAMBIGUATION_TEMPLATES", "ParsedPage", "add_link_targets", "article_target", "cut_not_prose",
           "is_disambiguation", "normalize_title", "parse_wikitext"]
