"""Rollout runner: tool budget, resumable run store, settings fingerprint. Never reads gold."""

__all__: list[str] = []
