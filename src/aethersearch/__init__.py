"""aethersearch: rigorous, reproducible evaluation of agentic search agents.

Data flows one way, and every stage ends in a versioned artefact on disk:
sources -> benchmark release -> rollout run -> scores -> report / comparison.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
