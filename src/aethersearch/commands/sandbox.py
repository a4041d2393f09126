"""`aether sandbox serve`: the masked sandbox of a hint-free release over HTTP.

Heavy imports stay inside the command functions so ``aether --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from aethersearch.commands.progress import make_console

__all__ = ["register"]

console = make_console()


def register(app: typer.Typer) -> None:
    """Add `aether sandbox ...`."""
    sandbox_app = typer.Typer(help="The masked Wikipedia sandbox (WebDetective).", no_args_is_help=True)
    app.add_typer(sandbox_app, name="sandbox")

    @sandbox_app.command("serve")
    def serve(
        release: Path = typer.Argument(..., help="hint-free release directory (from `aether construct`)"),
        index: Path = typer.Option(..., "--index", "-i", help="index directory over the release's page corpus"),
        host: str = typer.Option("127.0.0.1", "--host", help="bind address (loopback by default)"),
        port: int = typer.Option(8100, "--port", min=1, max=65535, help="TCP port, 1-65535"),
        action_log: Path | None = typer.Option(None, "--action-log",
                                               help="JSONL event log receiving every action as it happens "
                                                    "(masked ids included; server-side, for scoring); a restart "
                                                    "with the same file recovers the open episodes"),
        max_actions: int = typer.Option(400, "--max-actions", min=1,
                                        help="actions per episode (429 beyond); the paper's agents make <= 40"),
        max_open_episodes: int | None = typer.Option(None, "--max-open-episodes", min=1, help=(
            "open at once (429 beyond); default 10,000, lowered to what --max-episode-memory-mb holds; set beyond "
            "that, the sandbox refuses to start")),
        max_episode_memory_mb: int = typer.Option(4096, "--max-episode-memory-mb", min=1, help=(
            "the most memory open episodes may hold at worst (open episodes x actions x worst bytes per action)")),
        header_timeout_s: float = typer.Option(10.0, "--header-timeout-s", help="a request's headers must arrive "
                                               "within this of connecting or of the previous response"),
        body_timeout_s: float = typer.Option(30.0, "--body-timeout-s", help="a request body must arrive within "
                                                                            "this (408 beyond)"),
        keep_alive_s: int = typer.Option(5, "--keep-alive-s", help="idle keep-alive connections close after this"),
    ) -> None:
        """Serve create-episode / search / visit / close / trace for the release's questions."""
        from aethersearch.sandbox.episode import open_sandbox
        from aethersearch.sandbox.server import SandboxLimits, bounded_limits
        from aethersearch.sandbox.server import serve as run_server
        from aethersearch.search.http_guard import record_from_options
        from aethersearch.search.index_dir import open_index

        caps = {"max_actions": max_actions, "max_episode_memory_mb": max_episode_memory_mb,
                **({} if max_open_episodes is None else {"max_open_episodes": max_open_episodes})}
        limits = record_from_options(SandboxLimits, "aether sandbox serve", {}, **caps,
                                     timeouts={"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s,
                                               "keep_alive_s": keep_alive_s})
        opened = open_index(index)
        sandbox = open_sandbox(release, opened.index, opened.store, corpus_hash=opened.store.content_hash,
                               index_hash=opened.index.index_hash)
        limits, ceiling = bounded_limits(limits, sandbox)  # refuses here, with the fix, before binding
        console.print(f"sandbox for [bold]{escape(str(sandbox.release_id))}[/] ({len(sandbox.masks)} questions) "
                      f"on http://{escape(host)}:{port}; open episodes hold at most {ceiling / 2**20:,.0f} MB "
                      f"({limits.max_open_episodes:,} episodes x {limits.max_actions} actions)")
        run_server(sandbox, host=host, port=port, action_log=action_log, limits=limits)
