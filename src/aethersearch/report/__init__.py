"""Static, self-contained HTML reports."""
