"""Paired checkpoint comparison (Base/SFT/DPO/RL) on one frozen contract."""

__all__: list[str] = []
