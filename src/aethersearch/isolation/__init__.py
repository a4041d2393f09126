"""Curation stage 2, isolation: the training registry and the exclusion sets that keep training questions out of a release."""

__all__: list[str] = []
