"""The public API is declared with ``__all__`` and frozen here.

Why: users import these names from training loops and notebooks; removing or
renaming one breaks them silently at the next upgrade. A change to this table is a
deliberate API change (note it in the changelog), never a side effect.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC_API: dict[str, list[str]] = {
    "aethersearch.api": ["Evaluation", "evaluate", "evaluate_run"],
    "aethersearch.errors": ["AetherError", "BudgetExhausted", "ConfigError", "DataError", "EndpointError",
                            "IntegrityError", "JudgeErrors", "ReviewRequired", "RunFailed", "RunLocked", "ShortageError", "ToolError",
                            "ToolUnavailable"],
    "aethersearch.records": ["Budget", "DEFAULT_CONCURRENCY", "DETERMINISTIC_KINDS", "Decoding", "DiagnosticsRow",
                             "Document", "ERROR_OUTCOMES", "ErrorKind", "EvalRow", "InfoboxHop", "LLMCall", "Outcome", "Prediction",
                             "RETRIED_OUTCOMES", "Record", "RolloutQuestion", "RunFingerprint", "RunLimits",
                             "SCHEMA_VERSION", "SandboxContract", "SearchHit", "SparseRecord", "Step", "ToolCall", "Trace", "Usage"],
    "aethersearch.text": ["collapse_whitespace", "normalize_answer", "question_key", "template_key",
                          "template_key_of_key"],
    "aethersearch.jsonl": ["DurableAppender", "GroupCommitWriter", "TolerantRead", "atomic_write_bytes", "atomic_write_json",
                           "atomic_write_text", "dumps", "dumps_pretty", "encode_jsonl", "iter_jsonl", "loads",
                           "plain_line_encoder", "read_jsonl", "read_jsonl_tolerant", "read_records", "sha256_bytes", "sha256_file",
                           "truncate_to", "validate_row", "validation_problem", "write_jsonl"],
    "aethersearch.scoring.metrics": ["ABSTENTION_AWARE", "ALL_METRICS", "BINARY_METRICS", "Golds", "METRICS",
                                     "cover_em", "em", "f1", "gold_list", "popqa_acc", "score_all", "squad_em",
                                     "subem"],
    "aethersearch.abstention": ["ABSTENTION_RULE", "abstention_key", "is_abstention"],
    "aethersearch.scoring.api": ["QUESTIONS_FILE", "SCORES_FILE", "ScoreRefused", "Scores", "read_fingerprint",
                                 "per_question_rows", "read_scores", "score_row", "score_run",
                                 "searchr1_metrics"],
    "aethersearch.scoring.scores_file": ["BootstrapSettings", "BudgetSummary", "Disagreement", "ErrorSummary",
                                         "JoinSummary", "JudgeSummary", "MacroScores", "MetricEstimate",
                                         "MicroScores", "Overall", "PerQuestionFile", "QUESTIONS_FILE",
                                         "QuestionScore", "SCORES_FILE", "SCORES_SCHEMA_VERSION", "SampleScore",
                                         "Scores", "SourceScores", "UsageSummary", "UsageTotal", "VarianceShare",
                                         "read_scores"],
    "aethersearch.scoring.reducers": ["MAJ", "MEAN", "PASS", "SAMPLE_MEAN_RULE", "majority_index",
                                      "mean_over_samples", "parse_reducer", "pass_at_k", "question_summary",
                                      "reducer_names", "reducer_value", "within_variance_share"],
    "aethersearch.search.client": ["RetrievedDocument", "SearchClient", "TRANSIENT_STATUS"],
    "aethersearch.agents.base": ["AGENTS", "Agent", "AgentOutput", "Episode", "NO_MODEL", "finish",
                                 "finish_from_text", "finish_reply", "make_agent"],
    "aethersearch.environment": ["Environment", "REFUSAL_STATUS", "ToolResult", "tool_failure"],
    "aethersearch.registry": ["resolve"],
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_all_is_frozen(module_name: str) -> None:
    module = importlib.import_module(module_name)
    declared = sorted(getattr(module, "__all__", []))
    assert declared == sorted(PUBLIC_API[module_name]), (
        f"{module_name}.__all__ changed: added {sorted(set(declared) - set(PUBLIC_API[module_name]))}, "
        f"removed {sorted(set(PUBLIC_API[module_name]) - set(declared))}. If this is a deliberate API change, "
        f"update PUBLIC_API in {__file__}.")


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_public_names_exist_are_documented_and_typed(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        obj = getattr(module, name)  # AttributeError names a stale __all__ entry
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{module_name}.{name} has no docstring"
        if inspect.isfunction(obj):
            signature = inspect.signature(obj)
            assert signature.return_annotation is not inspect.Signature.empty, f"{module_name}.{name}: no return type"
            untyped = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
            assert not untyped, f"{module_name}.{name}: parameters without types: {untyped}"
