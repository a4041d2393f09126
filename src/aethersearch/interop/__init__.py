"""Interoperability with the field's training tools: verl/Search-R1 and FlashRAG files, verl's reward hook.

Everything here reads gold by design (a trainer's validation file carries its
targets), so this package sits beside ``compare``/``report`` above ``scoring`` and
is never imported by ``agents`` or ``rollout``.
"""

__all__: list[str] = []
