"""Static, self-contained HTML reports."""

__all__: list[str] = []
