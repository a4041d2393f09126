"""Scoring: the only code that reads gold answers."""

__all__: list[str] = []
