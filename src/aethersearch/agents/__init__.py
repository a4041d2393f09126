"""Agents and LLM endpoints. Never imports anything that reads gold answers."""
