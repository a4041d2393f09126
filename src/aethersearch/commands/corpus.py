"""`aether corpus ...`, `aether index build`, `aether search`, `aether serve`: thin wrappers.

Heavy imports (bm25s, numpy, uvicorn) stay inside the command functions so
``aether --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from aethersearch.commands.options import parse_key_values
from aethersearch.commands.progress import make_console

__all__ = ["faiss_settings", "index_option", "register"]

console = make_console()


def _settings(pairs: list[str] | None) -> dict[str, Any]:
    """``key=value`` options; values are parsed as JSON when they can be (``k1=1.2``, ``stemmer=null``)."""
    return parse_key_values(pairs, flag="--set", example="--set k1=1.2 --set stemmer=null")


def register(app: typer.Typer) -> None:
    """Add the corpus, index, search and serve commands to the CLI."""
    corpus_app = typer.Typer(help="Import corpora into document stores; write the demo world.", no_args_is_help=True)
    index_app = typer.Typer(help="Build search indexes.", no_args_is_help=True)
    app.add_typer(corpus_app, name="corpus")
    app.add_typer(index_app, name="index")

    @corpus_app.command("import")
    def corpus_import(
        fmt: str = typer.Argument(..., metavar="FORMAT", help="jsonl | dpr | wikiextractor | wikispeedia | wikipedia | demo"),
        source: Path = typer.Argument(..., help="corpus file or folder (ignored for demo)"),
        out: Path = typer.Option(..., "--out", "-o", help="store directory to write"),
        links: Path | None = typer.Option(None, "--links", help="links TSV (source<TAB>target)"),
        chunk: str = typer.Option("none", "--chunk", help="none | paragraph | words"),
        chunk_size: int = typer.Option(100, "--chunk-size", help="words per passage (--chunk words)"),
        chunk_overlap: int = typer.Option(0, "--chunk-overlap", help="words shared by neighbours"),
        pages_out: Path | None = typer.Option(None, "--pages-out", help="also write whole pages here"),
        seed: int = typer.Option(0, "--seed", help="demo world seed"),
        force: bool = typer.Option(False, "--force", help="replace an existing store"),
    ) -> None:
        """Import a corpus into an offset-indexed, hashed document store."""
        from aethersearch.corpus.chunking import ChunkConfig
        from aethersearch.corpus.importers import import_corpus

        config = ChunkConfig(mode=chunk, size=chunk_size, overlap=chunk_overlap)  # type: ignore[arg-type]
        with console.status("importing..."):
            result = import_corpus(fmt, source, out, links=links, chunk=config, pages_out=pages_out,
                                   seed=seed, overwrite=force)
        console.print(f"[green]wrote[/] {len(result.store):,} documents to {escape(str(out))}")
        console.print(f"corpus hash {result.store.content_hash}", soft_wrap=True)
        stats = result.links
        if stats.read:
            console.print(f"links: {stats.kept:,} kept, {stats.dropped:,} dropped of {stats.read:,} read"
                          + (f" (e.g. {stats.dropped_examples[:3]})" if stats.dropped else ""))

    @corpus_app.command("demo")
    def corpus_demo(
        out: Path = typer.Option(..., "--out", "-o", help="folder for corpus.jsonl, links.tsv, facts.jsonl, ..."),
        seed: int = typer.Option(0, "--seed"),
    ) -> None:
        """Write the embedded fictional demo world (corpus, links, single- and multi-hop questions)."""
        from aethersearch.corpus.demo_world import generate_world, write_world

        world = generate_world(seed=seed)
        files = write_world(world, out)
        console.print(f"[green]demo world[/] seed {seed}: {len(world.documents)} pages, {len(world.facts)} facts, "
                      f"{len(world.multihop_questions)} multi-hop questions -> {escape(str(files.corpus.parent))}")

    @corpus_app.command("info")
    def corpus_info(store: Path = typer.Argument(..., help="store directory")) -> None:
        """Print a store's manifest (count, content hash, source)."""
        from aethersearch.corpus.store import open_store

        console.print_json(open_store(store).describe().decode())

    @index_app.command("build")
    def index_build(
        corpus: Path = typer.Argument(..., help="a store directory, or a corpus file to import first"),
        backend: str = typer.Option("bm25", "--backend", help="bm25 | bm25-maxscore | dense | faiss | hybrid"),
        faiss_index: str | None = typer.Option(None, "--faiss-index", help="faiss kind: Flat | HNSW32 | IVF4096,PQ64 "
                                                                         "(any faiss factory string; --backend faiss)"),
        encoder: str | None = typer.Option(None, "--encoder", help="Hugging Face model folder or name (--backend faiss)"),
        wire_rows: bool = typer.Option(False, "--wire-rows", help="faiss: pre-encode every hit's JSON at build "
                                                                  "(about 2x the corpus text on disk; faster hits; "
                                                                  "--set wire_rows_url_prefix=URL for another prefix)"),
        out: Path = typer.Option(..., "--out", "-o", help="index directory to write"),
        fmt: str = typer.Option("jsonl", "--format", help="format of a raw corpus file"),
        links: Path | None = typer.Option(None, "--links", help="links TSV for a raw corpus"),
        settings: list[str] = typer.Option(None, "--set", help="backend setting key=value (repeatable)"),
        force: bool = typer.Option(False, "--force", help="replace an existing index"),
    ) -> None:
        """Build an index directory (config, corpus hash, build stats, index hash)."""
        import contextlib

        from aethersearch.commands.progress import progress
        from aethersearch.errors import ConfigError
        from aethersearch.search.index_dir import build_index

        with contextlib.ExitStack() as phases:
            current: dict[str, Any] = {}

            def report(phase: str, done: int, total: int) -> None:
                if current.get("phase") != phase:  # one progress display per build phase, with its own ETA
                    phases.close()
                    current.update(phase=phase, update=phases.enter_context(progress(f"index {phase}", unit=" docs")))
                if done % 256 == 0 or done == total:
                    current["update"](done, total or None)

            config = _settings(settings)
            if backend == "faiss":
                config = faiss_settings(config, faiss_index, encoder, wire_rows=wire_rows)
            elif faiss_index or encoder or wire_rows:
                raise ConfigError("--faiss-index, --encoder and --wire-rows apply to --backend faiss",
                                  fix="pass --backend faiss")
            opened = build_index(corpus, backend, out, config=config, corpus_format=fmt,
                                 links=links, overwrite=force, on_document=report)
            if current:
                current["update"](opened.manifest.corpus_size, opened.manifest.corpus_size)
        stats = opened.manifest.build_stats
        console.print(f"[green]built[/] {backend} index of {opened.manifest.corpus_size:,} documents in "
                      f"{stats['seconds']:.1f}s (peak RSS {stats['peak_rss_mb']:.0f} MB) -> {escape(str(out))}")
        console.print(f"index hash {opened.manifest.index_hash}", soft_wrap=True)

    @index_app.command("import")
    def index_import(
        kind: str = typer.Argument(..., metavar="KIND", help="searchr1: Search-R1's faiss index + corpus, as is"),
        faiss_file: Path = typer.Option(..., "--faiss", help="their index file (e5_Flat.index)"),
        corpus: Path = typer.Option(..., "--corpus", help="their corpus (wiki-18.jsonl); row i = index row i"),
        encoder: str = typer.Option(..., "--encoder", help="the query encoder's Hugging Face folder (e5-base-v2)"),
        out: Path = typer.Option(..., "--out", "-o", help="index directory to write"),
        retriever_name: str = typer.Option("e5", "--retriever-name", help="their --retriever_name: picks prefixes "
                                                                           "and pooling (e5, bge, ...)"),
        wire_rows: bool = typer.Option(False, "--wire-rows", help="faiss: pre-encode every hit's JSON at import "
                                                                  "(about 2x the corpus text on disk; faster hits)"),
        force: bool = typer.Option(False, "--force", help="replace an existing index"),
    ) -> None:
        """Serve another project's dense index without re-encoding (linked, checked against corpus and encoder)."""
        from aethersearch.errors import ConfigError
        from aethersearch.search.faiss_index import import_searchr1
        from aethersearch.search.wire import DEFAULT_URL_PREFIX

        if kind != "searchr1":
            raise ConfigError(f"unknown index import kind {kind!r}", fix="use: searchr1")
        with console.status("importing the corpus and checking the index..."):
            opened = import_searchr1(faiss_file, corpus, encoder, out, retriever_name=retriever_name, overwrite=force,
                                     wire_rows_url_prefix=DEFAULT_URL_PREFIX if wire_rows else None)
        stats = opened.manifest.build_stats
        console.print(f"[green]imported[/] {stats['index_type']} of {stats['documents']:,} vectors x "
                      f"{stats['dimension']} -> {escape(str(out))}", soft_wrap=True)
        console.print(f"index hash {opened.manifest.index_hash}", soft_wrap=True)

    @app.command("search")
    def search(
        words: list[str] = typer.Argument(..., metavar="[INDEX] QUERY", help="the query (after the index "
                                                                               "directory when --index is not given)"),
        index_opt: Path | None = typer.Option(None, "--index", "-i", help="index directory"),
        k: int = typer.Option(5, "--topk", "-k", min=1, help="how many results"),
    ) -> None:
        """Search an index and print the top results."""
        from rich.table import Table

        from aethersearch.errors import ConfigError
        from aethersearch.search.index_dir import open_index

        if index_opt is None and len(words) < 2:
            raise ConfigError("no index given", fix='aether search --index IDX "query"')
        index = index_option(None if index_opt is not None else Path(words[0]), index_opt)
        query = " ".join(words if index_opt is not None else words[1:])
        opened = open_index(index)
        hits = opened.index.search([query], k)[0]
        table = Table("rank", "score", "id", "title", "text")
        for rank, (doc_id, score) in enumerate(hits, start=1):
            doc = opened.store.get(doc_id)
            table.add_row(str(rank), f"{score:.3f}", escape(doc_id), escape(doc.title), escape(doc.text[:120]))
        console.print(table if hits else "[yellow]no results[/]")

    @app.command("serve")
    def serve(
        index_arg: Path | None = typer.Argument(None, metavar="[INDEX]", help="index directory (or --index)"),
        index_opt: Path | None = typer.Option(None, "--index", "-i", help="index directory"),
        port: int = typer.Option(8000, "--port", help="TCP port, 1-65535"),
        host: str = typer.Option("127.0.0.1", "--host", help="bind address (loopback by default)"),
        max_topk: int = typer.Option(100, "--max-topk", help="largest topk a request may ask for"),
        max_batch: int = typer.Option(16384, "--max-batch", help="queries per /retrieve request (Search-R1's "
                                                                 "train_grpo.sh sends 2,560)"),
        max_query_chars: int = typer.Option(4096, "--max-query-chars"),
        max_body_mb: float = typer.Option(16.0, "--max-body-mb", help="largest request body, MB"),
        max_response_mb: float = typer.Option(64.0, "--max-response-mb",
                                              help="largest reply one request may produce, MB (413 beyond)"),
        max_urls: int = typer.Option(64, "--max-urls", help="urls per /access request"),
        url_prefix: str = typer.Option("https://en.wikipedia.org/wiki/", "--url-prefix",
                                       help="url of a hit whose corpus row has none: this + the page id"),
        workers: int = typer.Option(1, "--workers", help="index calls running at once"),
        micro_batch: bool = typer.Option(True, "--micro-batch/--no-micro-batch"),
        default_topk: int = typer.Option(3, "--default-topk", help="topk of a request whose topk is null or 0"),
        max_micro_batch: int = typer.Option(2048, "--max-micro-batch",
                                            help="queries per index call; larger requests are searched in slices"),
        max_hits: int = typer.Option(65536, "--max-hits", help="queries x topk of one request (413 before "
                                                                "searching beyond)"),
        header_timeout_s: float = typer.Option(10.0, "--header-timeout-s", help="a request's headers must arrive "
                                               "within this of connecting or of the previous response"),
        body_timeout_s: float = typer.Option(30.0, "--body-timeout-s", help="a request body must arrive within "
                                                                            "this (408 beyond)"),
        keep_alive_s: int = typer.Option(5, "--keep-alive-s", help="idle keep-alive connections close after this"),
        pages: Path | None = typer.Option(None, "--pages", help="page store for /access (if the index holds passages)"),
        processes: int = typer.Option(1, "--processes", help="uvicorn worker processes sharing the port"),
        http: str = typer.Option("auto", "--http", help="HTTP parser: auto (httptools if installed), h11, httptools"),
        loop: str = typer.Option("auto", "--loop", help="event loop: auto (uvloop if installed), asyncio, uvloop"),
        mode_alias: list[str] = typer.Option([], "--mode-alias", help="MODE=TARGET: answer a retrieval mode the "  # noqa: B008
                                             "index lacks with one it has, e.g. hybrid=bm25 for AetherSearch's "
                                             "client on a BM25 index (shown in /health and run.json); repeatable"),
    ) -> None:
        """Serve an index over HTTP with the Search-R1 /retrieve API (+ ASearcher /access, /health).

        Prints the "serving ... on URL" line only once the server answers; exits non-zero
        with a message (never a traceback) for a bad option, a busy port or a bad index.
        """
        from aethersearch.search.modes import parse_mode_aliases
        from aethersearch.search.server import limits_from_options
        from aethersearch.search.server import serve as run_server

        index = index_option(index_arg, index_opt)
        limits = limits_from_options(
            max_topk=max_topk, max_batch=max_batch, max_query_chars=max_query_chars,
            max_body_bytes=_mb(max_body_mb), max_response_bytes=_mb(max_response_mb), max_urls=max_urls,
            url_prefix=url_prefix, workers=workers, micro_batch=micro_batch, default_topk=default_topk,
            max_micro_batch=max_micro_batch, max_hits=max_hits,
            timeouts={"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s,
                      "keep_alive_s": keep_alive_s})

        def ready(url: str) -> None:
            console.print(f"serving {escape(str(index))} on {url} (POST /retrieve, /access; GET /health)",
                          soft_wrap=True)

        run_server(str(index), host=host, port=port, limits=limits, pages_dir=str(pages) if pages else None,
                   processes=processes, http=http, loop=loop, on_ready=ready,
                   mode_aliases=parse_mode_aliases(mode_alias))


def faiss_settings(config: dict[str, Any], kind: str | None, encoder: str | None, *,
                   wire_rows: bool = False) -> dict[str, Any]:
    """``--faiss-index``, ``--encoder`` and ``--wire-rows`` folded into the faiss backend's ``--set`` settings
    (``--wire-rows`` pre-encodes for the server's default url prefix unless ``--set`` names another)."""
    from aethersearch.search.wire import DEFAULT_URL_PREFIX

    if wire_rows and "wire_rows_url_prefix" not in config:
        config = {**config, "wire_rows_url_prefix": DEFAULT_URL_PREFIX}
    if kind is not None:
        config = {**config, "factory": kind}
    if encoder is not None:
        config = {**config, "encoder": {**config.get("encoder", {}), "model": encoder}}
    return config


def _mb(value: float) -> int:
    return int(value * (1 << 20))


def index_option(positional: Path | None, option: Path | None) -> Path:
    """The index directory, given as ``--index DIR`` (the spelling ``run`` and ``eval`` use) or positionally."""
    from aethersearch.errors import ConfigError

    if positional is not None and option is not None and positional != option:
        raise ConfigError(f"two different indexes given: {positional} and --index {option}", fix="pass one")
    index = option if option is not None else positional
    if index is None:
        raise ConfigError("no index given", fix="pass --index DIR (an `aether index build` output)")
    return index
