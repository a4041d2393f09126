"""Write small MediaWiki XML exports (the official pages-articles layout) for importer tests."""

from __future__ import annotations

import bz2
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple
from xml.sax.saxutils import escape, quoteattr

HEAD = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <base>https://en.wikipedia.org/wiki/Main_Page</base>
    <case>first-letter</case>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="6" case="first-letter">File</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""


class Page(NamedTuple):
    """A page to export: wikitext, or a redirect target; ``text=None`` writes a revision without <text>."""

    title: str
    text: str | None = ""
    redirect: str | None = None
    namespace: int = 0


def export_xml(pages: Sequence[Page]) -> str:
    """The export as a string, pages in order, ids from 10."""
    parts = [HEAD]
    for number, page in enumerate(pages, start=10):
        redirect = f"    <redirect title={quoteattr(page.redirect)} />\n" if page.redirect else ""
        text = page.text if page.redirect is None else f"#REDIRECT [[{page.redirect}]]"
        body = "" if text is None else f'      <text xml:space="preserve">{escape(text)}</text>\n'
        parts.append(f"  <page>\n    <title>{escape(page.title)}</title>\n    <ns>{page.namespace}</ns>\n"
                     f"    <id>{number}</id>\n{redirect}    <revision>\n      <id>{number}0</id>\n"
                     f"      <model>wikitext</model>\n{body}    </revision>\n  </page>\n")
    parts.append("</mediawiki>\n")
    return "".join(parts)


def write_export(path: Path, pages: Sequence[Page], *, compress: bool = False) -> Path:
    """Write the export to ``path`` (bz2-compressed when ``compress``)."""
    data = export_xml(pages).encode("utf-8")
    path.write_bytes(bz2.compress(data) if compress else data)
    return path
