"""Scoring: the only code that reads gold answers."""
