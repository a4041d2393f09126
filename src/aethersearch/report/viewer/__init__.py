"""``aether view``: the local, read-only trace viewer (see ``app.py``)."""
