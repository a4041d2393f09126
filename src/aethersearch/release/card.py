"""The release's dataset card (``README.md``), laid out as the Eval-1400 card publishes it.

Why its figures are not written here: every number the card shows comes from
``verify_release_template.card_figures``, the one specification that the
standalone verifier copied into the release recomputes from the release's own
files. The card writer only lays those tables and sentences out between the
card's prose, so a figure cannot be typed by hand, and a card edited after the
build fails ``verify`` (check ``card figures``), naming the row that differs.

Sections, in the Eval-1400 card's order: Dataset overview, Evaluation contract,
Release at a glance, Source composition (with the deviations from the plan),
Public schema, Load with Datasets, Curation and integrity, Files, Checksums and
versioning, Attribution and rights. The YAML header carries ``license``,
``pretty_name``, ``tags`` and ``configs`` (the eval file as the ``validation``
split), which ``verify`` also checks.
"""

from __future__ import annotations

from typing import Any

from aethersearch.release import verify_release_template as standalone
from aethersearch.release.manifest import Manifest

__all__ = ["CONTRACT", "FILES", "SCHEMA", "TAGS", "dataset_card"]

#: The card's ``tags`` (the Eval-1400 card's, less its project-specific ``sft-eval``).
TAGS = ("aethersearch", "agentic-search", "retrieval-augmented-generation", "multi-hop-question-answering",
        "evaluation", "benchmark")

#: The When / Use table of the evaluation contract: what the frozen release is for at each step.
CONTRACT = (
    ("During training", "Periodic evaluation of intermediate checkpoints on the frozen validation split"),
    ("After training", "Evaluate the completed checkpoint on the same full split"),
    ("Base / SFT / DPO / RL comparison", "Reuse the same revision, question IDs, gold aliases, and evaluation "
                                         "settings"),
    ("Agent rollout", "Supply only id and question from the question-only file or projection"),
    ("Scoring", "Keep answers in the evaluator and join predictions by id"),
    ("Evidence diagnostics", "Read supporting facts from the separate diagnostics sidecar when auditing"),
)

#: Field, type and meaning of each eval row (``records.EvalRow``; the verifier's ``EVAL_FIELDS``).
SCHEMA = (
    ("id", "string", "Frozen benchmark ID, {first} through {last}"),
    ("question", "string", "Original held-out question text"),
    ("answers", "list[string]", "Non-empty official answer aliases for the scorer"),
    ("source_dataset", "string", "One of the source names above"),
    ("source_split", "string", "Original official partition"),
    ("source_id", "string or null", "Original example ID when supplied by the source"),
    ("source_row_number", "integer", "One-based row location in the pinned source file"),
    ("source_file", "string", "Source-file identity within the provenance snapshot"),
)

FILES = (
    ("eval", "Canonical evaluation split, with evaluator gold aliases and provenance"),
    ("rollout", "Same IDs and questions, with exactly two fields for agent input"),
    ("manifest", "Composition, pinned official sources, isolation checks, the resolved config and every "
                 "file's hash"),
    ("exclusion_audit", "Training-source registry, exclusions, and near-duplicate review decisions"),
    ("diagnostics", "Official supporting facts and diagnostic metadata; audit use only"),
    ("independent_validation", "Independent source, gold, training-isolation, and replay verification report"),
    ("verifier", "Standalone (standard library) release-file, row-integrity, figure and card verifier"),
    ("checksums", "SHA-256 values for all published content files"),
    ("attribution", "Upstream attribution and rights-status record"),
    ("card", "This card"),
)


def _yaml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _size_category(n: int) -> str:
    return "n<1K" if n < 1000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "n>100K"


def _header(manifest: Manifest) -> str:
    names = manifest.layout
    features = "\n".join(f"  - name: {name}\n    dtype: {dtype}" for name, dtype in (
        ("id", "string"), ("question", "string"), ("source_dataset", "string"), ("source_split", "string"),
        ("source_id", "string"), ("source_row_number", "int64"), ("source_file", "string")))
    tags = "\n".join(f"- {tag}" for tag in TAGS)
    return f"""---
license: {manifest.config.get("license", "other")}
pretty_name: {_yaml_str(manifest.name)}
language:
- en
task_categories:
- question-answering
size_categories:
- {_size_category(manifest.question_count)}
tags:
{tags}
configs:
- config_name: default
  data_files:
  - split: {standalone.HUB_SPLIT}
    path: {names["eval"]}
dataset_info:
  features:
{features}
  - name: answers
    sequence: string
  splits:
  - name: {standalone.HUB_SPLIT}
    num_examples: {manifest.question_count}
---"""


def _load_snippet(manifest: Manifest) -> str:
    hub = manifest.config.get("hub_repo")
    where = (f'    "{hub}",\n    revision="{manifest.revision}",' if hub else
             '    ".",  # this directory; or the Hub repository id with revision=...')
    return f"""```python
from datasets import load_dataset

benchmark = load_dataset(
{where}
    split="{standalone.HUB_SPLIT}",
)

assert len(benchmark) == {manifest.question_count}

agent_inputs = benchmark.select_columns(["id", "question"])
gold_by_id = {{row["id"]: row["answers"] for row in benchmark}}

# Pass agent_inputs to the rollout runner; keep gold_by_id in the scorer.
print(agent_inputs[0])
```"""


def _curation_steps(manifest: Manifest) -> str:
    audited = manifest.audit is not None
    steps = [
        "Register the training releases (canonical and historical files, pinned by sha256) in the training "
        "registry; a changed file stops the build.",
        "Normalize every training and candidate question with Unicode NFKC, casefold, whitespace collapse, strip, "
        "and removal of trailing ASCII or full-width question marks.",
        "Remove exact training overlaps, conservative punctuation/template equivalents, and internal or "
        "cross-source normalized duplicates.",
        f"Sample deterministically with seed {manifest.seed}. Candidates are sorted by source ID, normalized "
        "question, and original row number before a separate seeded shuffle for each source. Reviewed exclusions "
        "trigger the same deterministic selection again; a shortage fails the build.",
        ("Audit the selected questions against the complete training-question union with exhaustive "
         "character-similarity retrieval and rare-token retrieval, and resolve each flagged pair by a recorded "
         "review decision." if audited else "No near-duplicate audit was configured for this build."),
        "Independently reconstruct the exclusion sets from the original training files, verify the selected "
        "questions and aliases against the original held-out rows, replay sampling, and verify that every "
        "source and training file hash is unchanged.",
    ]
    return "\n".join(f"{index}. {step}" for index, step in enumerate(steps, start=1))


def dataset_card(manifest: Manifest, rows: list[dict[str, Any]], validation: dict[str, Any] | None) -> str:
    """README.md as a Hugging Face dataset card, every figure from ``card_figures`` over the release's files.

    ``rows`` are the eval rows as parsed JSON and ``validation`` the parsed ``independent_validation.json``:
    the same inputs the verifier reads back, so the card and its check cannot disagree.
    """
    figures = standalone.card_figures(manifest.model_dump(mode="json"), rows, validation)
    tables = figures["tables"]
    stages_sentence, isolation_sentence, *audit_sentences = figures["sentences"]
    audit_sentence = " ".join(audit_sentences)  # what the audit found, then who decided its pairs

    def table(heading: str) -> str:
        header, body = tables[heading]
        return standalone.markdown_table(header, body)

    names = manifest.layout
    n = manifest.question_count
    deviations = "\n".join(f"- {d}" for d in manifest.deviations) or "- none"
    schema = standalone.markdown_table(("Field", "Type", "Meaning"), [
        (field, kind, meaning.format(first=rows[0]["id"] if rows else "-", last=rows[-1]["id"] if rows else "-"))
        for field, kind, meaning in SCHEMA])
    files = standalone.markdown_table(("File", "Purpose"), [(f"`{names[role]}`", what) for role, what in FILES])
    license_text = ("This combined release does not assert a blanket license over the source questions, aliases "
                    "or supporting metadata; the card therefore uses `license: unknown`."
                    if manifest.config.get("license") == "unknown" else
                    f"The card declares `license: {manifest.config.get('license', 'other')}`.")
    return f"""{_header(manifest)}

# {manifest.name}

{manifest.description or "A frozen, verifiable question-answering benchmark release built by aethersearch."}

## Dataset overview

{manifest.name} is a frozen, {n:,}-question evaluation suite drawn from {len(manifest.sources)} QA sources'
held-out partitions and isolated from the registered training questions. The Hub exposes one split, `{standalone.HUB_SPLIT}`,
backed by `{names["eval"]}`. Training-time and final evaluation reuse that exact split, question order and gold
aliases; this release does not supply a separate final holdout.

## Evaluation contract

{standalone.markdown_table(("When", "Use"), CONTRACT)}

All questions remain evaluation data: exclude them from gradient training, preference-pair construction and RL
optimization. Gold aliases and supporting evidence stay outside agent prompts. The release fixes questions and
reference answers; for checkpoint comparisons, also keep the scoring implementation, retrieval corpus, tool
budget, prompt and decoding settings consistent. No model performance results are included.

## Release at a glance

{table(standalone.GLANCE)}

## Source composition

{table(standalone.COMPOSITION)}

Seed {manifest.seed}. Sampling: {manifest.sampling}. A source whose cap is below its planned count supplies its
cap; its shortfall is dealt out one question at a time over the other sources in the fixed source order. Each
record preserves its original `source_split`; source revisions, locations and file SHA-256 values are recorded in
`{names["manifest"]}`.

### Deviations from the plan

{deviations}

## Public schema

{schema}

Sources without original example IDs have a null `source_id`; row numbers, file names and the source hashes in the
manifest give their original identity. `{names["rollout"]}` holds exactly `id` and `question` for the same rows in
the same order; `{names["diagnostics"]}` holds supporting metadata where the source provides it, joined by `id`.

## Load with Datasets

{_load_snippet(manifest)}

A runner that reads JSONL directly takes `{names["rollout"]}`.

## Curation and integrity

The build follows this sequence:

{_curation_steps(manifest)}

{table(standalone.CURATION)}

{stages_sentence}

{isolation_sentence}

{audit_sentence}

Similarity retrieves pairs for review; it is not an automatic semantic deletion rule. Changed entities, years,
answer slots or reasoning targets are retained when they ask different questions. The audit does not claim to
detect every possible paraphrase. Every exclusion and decision is recorded in `{names["exclusion_audit"]}`.

## Files

{files}

## Checksums and versioning

{table(standalone.CHECKSUMS_SECTION)}

Verify the files without loading a model:

```
sha256sum -c {names["checksums"]}
python {names["verifier"]}
```

Pin revision `{manifest.revision}` when comparing checkpoints. Changes to question membership, gold aliases,
composition or sampling require a new benchmark version.

## Attribution and rights

The upstream QA datasets keep their own terms and attribution requirements. {license_text} See
`{names["attribution"]}` and the pinned source references in `{names["manifest"]}`.
"""
