"""Benchmark curation end to end: the build config, the build loop over the stages and the ready-made configs.

The stages are packages of their own, in order: ``sources``, ``isolation``, ``selection``, ``audit``, ``release``.
"""

__all__: list[str] = []
