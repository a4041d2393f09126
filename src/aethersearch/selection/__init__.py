"""Curation stage 3, selection: the card's quotas and the seeded, deterministic sampling per source."""

__all__: list[str] = []
