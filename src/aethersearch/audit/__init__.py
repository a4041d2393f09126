"""Curation stage 4, the near-duplicate audit: similarity, blocking, rare tokens, the review file and its auto-decision policy."""

__all__: list[str] = []
