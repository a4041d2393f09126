"""Corpus: document stores, importers, the hyperlink graph and the embedded demo world."""

__all__: list[str] = []
