"""An MCP server over the frozen corpus and the masked sandbox, under the run contract (``aether mcp``)."""

__all__: list[str] = []
