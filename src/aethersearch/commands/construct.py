"""`aether construct demo|wikispeedia|wikipedia`: hint-free multi-hop releases, with a rich summary table.

Heavy imports stay inside the command functions so ``aether --help`` stays fast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from aethersearch.commands.progress import make_console

if TYPE_CHECKING:
    from aethersearch.construct.hintfree import BuiltRelease

__all__ = ["DETOURS", "FACT_SEEDS", "FORCE", "GROUNDING", "HOPS", "KEEP_MEMORISED", "KEY_ENV", "MAX_ALTERNATIVES",
    "MAX_HOPS", "MAX_QUESTIONS", "MEMORISED_OUT", "MIN_HOPS", "NO_SCREEN", "OUT", "REVIEW", "SCREEN_ENDPOINT",
    "SCREEN_MODEL", "SEED", "UNLINKED", "VALIDATOR_ENDPOINT", "VALIDATOR_MODEL", "construction_progress",
    "model_checks", "parse_hop_mix", "register", "summary_table"]

console = make_console()


def summary_table(built: BuiltRelease) -> Table:
    """Hop distribution and rejected counts by reason of one construction."""
    result = built.result
    table = Table(title=f"hint-free construction -> {escape(str(built.path))}")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("triples (single-hop candidates)", str(len(built.triples.triples)))
    table.add_row("considered", str(result.considered))
    table.add_row("[bold]accepted questions[/]", f"[bold]{len(result.questions)}[/]")
    for hops, count in result.hop_distribution.items():
        table.add_row(f"  {hops}-hop", str(count))
    for mixed, row in (result.hop_mix or {}).items():
        table.add_row(f"  {mixed}-hop target", f"{row['achieved']}/{row['target']}"
                      + (f" (short by {row['short_by']})" if row.get("short_by") else ""))
    for reason, count in result.rejected.items():
        table.add_row(f"rejected: {escape(reason)}", str(count))
    if result.detours:
        table.add_row("detour tier (not entailing, separate release)", str(len(result.detours)))
    from aethersearch.construct.diversity import goals

    met = goals([q.triple.relation for q in result.questions], [q.triple.answer_page for q in result.questions],
                [len(q.path) - 1 for q in result.questions], result.rejected)
    for name, row in met["goals"].items():
        table.add_row(f"goal {name}: target {row['target']}", f"{row['achieved']}"
                      + ("" if row["met"] else " [bold red](not met)[/]"))
    for reason, count in met.get("stopped_by", {}).items():
        table.add_row(f"  goals stopped by: {escape(reason)}", str(count))
    screen = built.checks.get("parametric_screen")
    if isinstance(screen, dict):
        table.add_row("parametric screen: questions asked without search", str(screen["screened"]))
        table.add_row("  answered without search (exact or cover match)", str(screen["answered_without_search"]))
        table.add_row("  of which exact match", str(screen["exact_match"]))
    return table


def _config(seed: int, min_hops: int, max_hops: int, max_questions: int | None, max_alternatives: int,
            grounding: bool, allow_unlinked: bool = False, hop_targets: dict[int, float] | None = None) -> Any:
    """The run's ConstructionConfig; an out-of-range option is a ConfigError naming it (never a traceback)."""
    from pydantic import ValidationError

    from aethersearch.construct.hintfree import ConstructionConfig
    from aethersearch.errors import ConfigError

    try:
        return ConstructionConfig(seed=seed, min_hops=min_hops, max_hops=max_hops, max_questions=max_questions,
                                  max_alternatives=max_alternatives, require_grounding=grounding,
                                  allow_unlinked=allow_unlinked, hop_targets=hop_targets)
    except ValidationError as exc:
        problems = "; ".join(f"--{str(e['loc'][0]).replace('_', '-')} {e['input']!r}: {e['msg'].lower()}"
                             for e in exc.errors())
        raise ConfigError(f"invalid construction option(s): {problems}",
                          fix="paths need --min-hops >= 2; --max-questions and --max-alternatives must be "
                              "positive / non-negative") from None


def _need(value: str | None, option: str) -> str:
    if not value:
        from aethersearch.errors import ConfigError

        raise ConfigError(f"{option} is required with its endpoint option", fix=f"pass {option} NAME")
    return value


def parse_hop_mix(value: str) -> dict[int, float]:
    """``--hops 2:0.15,3:0.55,4:0.30`` -> ``{2: 0.15, 3: 0.55, 4: 0.30}``; a malformed mix is a ConfigError."""
    from aethersearch.errors import ConfigError

    mix: dict[int, float] = {}
    try:
        for part in value.split(","):
            hops, share = part.split(":")
            mix[int(hops)] = float(share)
    except ValueError:
        raise ConfigError(f"--hops {value!r} is not a hop mix", fix="write HOPS:SHARE pairs, e.g. "
                                                                    "2:0.15,3:0.55,4:0.30") from None
    total = sum(mix.values())
    if any(h < 2 for h in mix) or any(s < 0 for s in mix.values()) or abs(total - 1.0) > 1e-6:
        raise ConfigError(f"--hops {value!r}: hop counts must be >= 2 and shares non-negative, summing to 1 "
                          f"(they sum to {total:g})", fix="e.g. --hops 2:0.15,3:0.55,4:0.30")
    return mix


@contextlib.contextmanager
def construction_progress() -> Iterator[Callable[[int, int, int], None]]:
    """Candidates tried out of the seeded order, with the accepted count and an ETA (plain lines when redirected)."""
    from aethersearch.commands.progress import progress

    with progress("construct", unit=" candidates", fields={"accepted": 0}) as update:
        def on_candidate(considered: int, candidates: int, accepted: int) -> None:
            update(considered, candidates, accepted=accepted)

        yield on_candidate


# options of the real-page constructions (wikispeedia, wikipedia), declared once
OUT = typer.Option(..., "--out", "-o", help="release directory to write")
SEED = typer.Option(0, "--seed")
MIN_HOPS = typer.Option(2, "--min-hops")
MAX_HOPS = typer.Option(4, "--max-hops")
MAX_QUESTIONS = typer.Option(None, "--max-questions")
MAX_ALTERNATIVES = typer.Option(8, "--max-alternatives")
GROUNDING = typer.Option(True, "--grounding/--no-grounding")
FORCE = typer.Option(False, "--force")
# The model checks and the entailment options every real-page construction (wikispeedia, wikipedia) takes.
VALIDATOR_ENDPOINT = typer.Option(None, "--validator-endpoint",
                                  help="OpenAI-compatible base URL: the LLM entailment judge")
VALIDATOR_MODEL = typer.Option(None, "--validator-model")
SCREEN_ENDPOINT = typer.Option(None, "--screen-endpoint", help="OpenAI-compatible base URL of a capable model for "
                                                                "the parametric screen (default: the shipped "
                                                                "SmolLM2-135M, served on loopback)")
NO_SCREEN = typer.Option(False, "--no-screen", help="build without the parametric screen (the manifest says so)")
MEMORISED_OUT = typer.Option(None, "--memorised-out", help="also write the questions the screen dropped as "
                                                           "memorised, as a separately named release here")
SCREEN_MODEL = typer.Option(None, "--screen-model")
UNLINKED = typer.Option(False, "--unlinked-seeds/--linked-seeds-only",
                        help="also use seed pairs whose subject page does not link the answer (shortest path as is; "
                             "rows record direct_link null)")
KEY_ENV = typer.Option(None, "--key-env", help="env var holding the endpoints' API key")
FACT_SEEDS = typer.Option(True, "--fact-seeds/--no-fact-seeds",
                          help="also derive minimal-need seeds from the pages' typed facts")
HOPS = typer.Option(None, "--hops", help="target hop mix, e.g. 2:0.15,3:0.55,4:0.30 (of --max-questions); the "
                                         "build reports what the graph allowed against it")
KEEP_MEMORISED = typer.Option(False, "--keep-memorised", help="keep (marked) the questions the --screen-endpoint "
                                                              "model answers without search; default: drop them")
REVIEW = typer.Option(None, "--review", help="question review decisions (the audit's form, merged by `aether "
                                             "review`): retain or exclude each question; the build writes "
                                             "OUT.question_review.todo.json with the undecided ones")
DETOURS = typer.Option(None, "--detours-out", help="also write the chains that do not entail their answer, as a "
                                                   "separately named detour-tier release in this directory")


def model_checks(validator_endpoint: str | None, validator_model: str | None, screen_endpoint: str | None,
                 screen_model: str | None, key_env: str | None, no_screen: bool = False) -> tuple[Any, Any]:
    """The LLM entailment judge (None when not asked) and the parametric screen: ``--screen-endpoint``'s
    model, else the shipped small model served on loopback for the screen (``construct.shipped_screen``;
    a ConfigError with the fix when it is not installed), None with ``--no-screen``."""
    judge = None
    if validator_endpoint is not None:
        from aethersearch.construct.llm_entailment import LLMEntailmentJudge

        judge = LLMEntailmentJudge(validator_endpoint, _need(validator_model, "--validator-model"),
                                   api_key_env=key_env)
    screen = None
    if screen_endpoint is not None:
        from aethersearch.construct.llm_checks import parametric_screen

        model = _need(screen_model, "--screen-model")
        url = screen_endpoint

        def screen(questions: Any) -> Any:
            from aethersearch.commands.progress import progress

            with progress("parametric screen", unit=" questions") as update:
                return parametric_screen(questions, url, model, api_key_env=key_env,
                                         on_question=lambda done, total: update(done, total))
    elif not no_screen:
        from aethersearch.construct.shipped_screen import SHIPPED_MODEL, serve_shipped, shipped_gguf

        gguf = shipped_gguf()  # before the build: a missing model stops it at once, with the fix

        def screen(questions: Any) -> Any:
            from aethersearch.commands.progress import progress
            from aethersearch.construct.llm_checks import parametric_screen

            with serve_shipped(gguf) as url, progress("parametric screen (shipped model)",
                                                      unit=" questions") as update:
                return parametric_screen(questions, url, SHIPPED_MODEL,
                                         on_question=lambda done, total: update(done, total))
    return judge, screen


def register(app: typer.Typer) -> None:
    """Add `aether construct ...`."""
    construct_app = typer.Typer(help="Build hint-free multi-hop releases (WebDetective construction).",
                                no_args_is_help=True)
    app.add_typer(construct_app, name="construct")

    @construct_app.command("demo")
    def demo(
        out: Path = typer.Option(..., "--out", "-o", help="release directory to write"),
        seed: int = typer.Option(0, "--seed", help="demo world seed (also the selection seed)"),
        min_hops: int = typer.Option(2, "--min-hops"),
        max_hops: int = typer.Option(4, "--max-hops"),
        max_questions: int = typer.Option(60, "--max-questions", help="stop after this many accepted"),
        max_alternatives: int = typer.Option(8, "--max-alternatives", help="other shortest paths recorded"),
        grounding: bool = typer.Option(True, "--grounding/--no-grounding", help="require a chain page to name v0"),
        force: bool = typer.Option(False, "--force", help="replace an existing release"),
    ) -> None:
        """Construct hint-free questions over the embedded demo world."""
        from aethersearch.construct.build import build_demo_release

        with construction_progress() as on_candidate:
            built = build_demo_release(out, seed=seed, overwrite=force,
                                       config=_config(seed, min_hops, max_hops, max_questions, max_alternatives,
                                                      grounding), on_candidate=on_candidate)
        console.print(summary_table(built))

    @construct_app.command("wikispeedia")
    def wikispeedia(
        data: Path = typer.Argument(..., help="Wikispeedia folder (plaintext_articles.tar.gz + "
                                              "wikispeedia_paths-and-graph/links.tsv)"),
        out: Path = OUT,
        seed: int = SEED,
        min_hops: int = MIN_HOPS,
        max_hops: int = MAX_HOPS,
        max_questions: int | None = MAX_QUESTIONS,
        max_alternatives: int = MAX_ALTERNATIVES,
        grounding: bool = GROUNDING,
        force: bool = FORCE,
        seeds: Path | None = typer.Option(None, "--seeds", help="folder holding the seed question lists (qa/, "
                                                                "search_r1_processed/ ...; default: DATA/..)"),
        validator_endpoint: str | None = VALIDATOR_ENDPOINT,
        validator_model: str | None = VALIDATOR_MODEL,
        screen_endpoint: str | None = SCREEN_ENDPOINT,
        screen_model: str | None = SCREEN_MODEL,
        key_env: str | None = KEY_ENV,
        unlinked: bool = UNLINKED,
        fact_seeds: bool = FACT_SEEDS,
        hops: str | None = HOPS,
        keep_memorised: bool = KEEP_MEMORISED,
        review: Path | None = REVIEW,
        detours: Path | None = DETOURS,
        no_screen: bool = NO_SCREEN,
        memorised_out: Path | None = MEMORISED_OUT,
    ) -> None:
        """Construct hint-free questions on real Wikispeedia pages from real single-hop seed questions.

        The release holds only chains that entail their answer: typed hops
        that compose to the question's relation, or -- with
        --validator-endpoint -- chains the model judges sufficient and
        necessary. Every accepted question is asked without search -- by the
        shipped SmolLM2-135M (served on loopback), or --screen-endpoint's
        model -- and dropped when answered (--keep-memorised keeps it marked;
        --memorised-out writes the dropped ones apart; --no-screen skips the
        screen). A dead endpoint stops the build with a non-zero exit and
        writes nothing.
        """
        from aethersearch.construct.build import build_wikispeedia_release
        from aethersearch.corpus.importers import iter_wikispeedia, wikispeedia_paths

        config = _config(seed, min_hops, max_hops, max_questions, max_alternatives, grounding, unlinked,
                         hop_targets=parse_hop_mix(hops) if hops is not None else None)
        documents = list(iter_wikispeedia(*wikispeedia_paths(data)))
        judge, screen = model_checks(validator_endpoint, validator_model, screen_endpoint, screen_model, key_env,
                                     no_screen)
        with construction_progress() as on_candidate:
            built = build_wikispeedia_release(data, out, overwrite=force, config=config, documents=documents,
                                              seeds_root=seeds, fact_seeds=fact_seeds, judge=judge, screen=screen,
                                              keep_memorised=keep_memorised, detours_out=detours, review=review,
                                              memorised_out=memorised_out, on_candidate=on_candidate)
        console.print(summary_table(built))

    @construct_app.command("wikipedia")
    def wikipedia(
        dump: Path = typer.Argument(..., help="MediaWiki XML export (pages-articles), .xml or .xml.bz2"),
        out: Path = OUT,
        seeds: Path | None = typer.Option(None, "--seeds", help="folder holding the seed question lists (qa/, "
                                                                "search_r1_processed/ ...; default: DUMP/../..)"),
        seed: int = SEED,
        min_hops: int = MIN_HOPS,
        max_hops: int = MAX_HOPS,
        max_questions: int | None = MAX_QUESTIONS,
        max_alternatives: int = MAX_ALTERNATIVES,
        grounding: bool = GROUNDING,
        unlinked: bool = UNLINKED,
        workers: int = typer.Option(1, "--workers", min=1, help="processes parsing wikitext"),
        keep_disambiguation: bool = typer.Option(False, "--keep-disambiguation",
                                                 help="keep disambiguation pages as ordinary pages"),
        store: Path | None = typer.Option(None, "--store", help="keep the page store the construction reads "
                                          "its pages from here (default: a temporary one beside --out, removed "
                                          "after the build); `aether index build` and `aether sandbox serve` take it"),
        force: bool = FORCE,
        validator_endpoint: str | None = VALIDATOR_ENDPOINT,
        validator_model: str | None = VALIDATOR_MODEL,
        screen_endpoint: str | None = SCREEN_ENDPOINT,
        screen_model: str | None = SCREEN_MODEL,
        key_env: str | None = KEY_ENV,
        fact_seeds: bool = FACT_SEEDS,
        hops: str | None = HOPS,
        keep_memorised: bool = KEEP_MEMORISED,
        review: Path | None = REVIEW,
        detours: Path | None = DETOURS,
        no_screen: bool = NO_SCREEN,
        memorised_out: Path | None = MEMORISED_OUT,
    ) -> None:
        """Construct hint-free questions on the articles of a real Wikipedia dump (the Wikispeedia construction).

        Redirects become page aliases; links inside templates and infoboxes are
        links; disambiguation pages are left out. A truncated or malformed dump
        stops with the byte offset or line, and nothing is written.
        """
        from aethersearch.construct.wikipedia import build_wikipedia_release

        config = _config(seed, min_hops, max_hops, max_questions, max_alternatives, grounding, unlinked,
                         hop_targets=parse_hop_mix(hops) if hops is not None else None)
        judge, screen = model_checks(validator_endpoint, validator_model, screen_endpoint, screen_model, key_env,
                                     no_screen)
        with construction_progress() as on_candidate:
            built = build_wikipedia_release(dump, out, seeds_root=seeds, config=config, overwrite=force,
                                            workers=workers, keep_disambiguation=keep_disambiguation, store=store,
                                            fact_seeds=fact_seeds, judge=judge, screen=screen,
                                            keep_memorised=keep_memorised, detours_out=detours, review=review,
                                            memorised_out=memorised_out, on_candidate=on_candidate)
        console.print(summary_table(built))
