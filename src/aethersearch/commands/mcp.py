"""``aether mcp``: serve a release's tools over the Model Context Protocol, into a run directory."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the CLI."""

    @app.command("mcp")
    def mcp_command(
        release: Path = typer.Argument(..., help="Release directory (a hint-free release is served in its sandbox)."),
        out: Path = typer.Option(..., "--out", "-o", help="Run directory the episodes are written to (resumable)."),
        index: Path | None = typer.Option(None, "--index", help="Index directory of the release's corpus."),
        search_url: str | None = typer.Option(None, "--search-url", help="Or a running `aether serve`."),
        sandbox_url: str | None = typer.Option(None, "--sandbox-url", help="Or a running `aether sandbox serve` "
                                                                          "(hint-free release)."),
        transport: str = typer.Option("stdio", "--transport", help="stdio (the client starts this command) or "
                                                                   "http (streamable HTTP at /mcp)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Interface for --transport http."),
        port: int = typer.Option(8200, "--port", help="Port for --transport http."),
        max_tool_calls: int | None = typer.Option(None, "--max-tool-calls", help="Tool calls per question "
                                                                                 "(default: the run default)."),
        preset: str | None = typer.Option(None, "--preset", help="webdetective: the paper's budget."),
        question_deadline: float | None = typer.Option(None, "--question-deadline",
                                                       help="Seconds an episode may stay open (default none)."),
    ) -> None:
        """Serve search (and visit, in a sandbox) as MCP tools; each question a client starts is an episode of OUT."""
        from aethersearch import sandbox_eval
        from aethersearch.agents.remote import RemoteAgent
        from aethersearch.errors import ConfigError
        from aethersearch.mcp_bridge.server import Bridge, run
        from aethersearch.rollout.budget import resolve_budget

        if transport not in ("stdio", "http"):
            raise ConfigError(f"--transport {transport!r}", fix="use stdio or http")
        # no model calls here: only the tool-call limit binds (the client's own turns are its business)
        budget = resolve_budget(preset, max_tool_calls=max_tool_calls).model_copy(update={"max_turns": None})
        tools = sandbox_eval.tools_for(release, agent=RemoteAgent.name, index=index, search_url=search_url,
                                       sandbox_url=sandbox_url, run_dir=out)
        search = tools.search if isinstance(tools, sandbox_eval.SandboxTools) else tools
        bridge = Bridge(release, out, search, budget=budget, sandbox=isinstance(tools, sandbox_eval.SandboxTools),
                        question_timeout_s=question_deadline)
        where = "stdio" if transport == "stdio" else f"http://{host}:{port}/mcp"
        print(f"aether mcp: serving {', '.join((*bridge.tools, 'answer'))} for {release} on {where}; "
              f"episodes -> {out}", file=sys.stderr, flush=True)
        run(bridge, transport=transport, host=host, port=port)
