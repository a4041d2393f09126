"""Curation stage 5, the release: manifest and files, the dataset card, verification, the standalone verifier template and the replay."""

__all__: list[str] = []
