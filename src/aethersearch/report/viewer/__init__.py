"""``aether view``: the local, read-only trace viewer (see ``app.py``).

The address lives here, light to import, so the commands' defaults and the
report's links into a running viewer agree by construction.
"""

__all__ = ["VIEWER_HOST", "VIEWER_PORT", "VIEWER_URL"]

VIEWER_HOST = "127.0.0.1"
VIEWER_PORT = 7575
VIEWER_URL = f"http://{VIEWER_HOST}:{VIEWER_PORT}"
