"""Hint-free multi-hop question construction over a hyperlink graph."""

__all__: list[str] = []
