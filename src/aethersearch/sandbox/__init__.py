"""Masked Wikipedia sandbox: per-episode masking, browse tools and their action log."""

__all__: list[str] = []
