"""Agents and LLM endpoints. Never imports anything that reads gold answers."""

__all__: list[str] = []
