"""Search: the SearchIndex protocol, its backends, the HTTP server and client."""

__all__: list[str] = []
