"""Tokens and cost of a scored run: the agent's and each judge's, priced from a user's table.

Why a user's table and not prices shipped here: prices change monthly and differ by provider,
contract and cache discount; a figure computed from a stale shipped table would be a plausible
wrong number. So ``--prices FILE`` names one (YAML or JSON), and a model it does not list gets
``cost: null`` with the reason, never 0::

    currency: USD
    models:
      gpt-4o-mini: {input_per_million: 0.15, output_per_million: 0.60}
      my-rl-checkpoint: {input_per_million: 0.0, output_per_million: 0.0}

The agent's tokens are the run's recorded usage (summed over every question and sample); a
judge's are those its replies reported, cached verdicts included (what the verdicts cost when
they were bought), so the figure does not depend on what the cache held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aethersearch.errors import DataError
from aethersearch.records import RunFingerprint
from aethersearch.scoring.scores_file import QuestionScore

__all__ = ["Price", "PriceTable", "load_prices", "priced", "run_cost"]


class Price(BaseModel):
    """What one model costs per million prompt (input) and completion (output) tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class PriceTable(BaseModel):
    """A user's price table: a currency and a price per model name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = "USD"
    models: dict[str, Price]


def load_prices(path: Path) -> PriceTable:
    """Read a price table (YAML or JSON), refusing a malformed one with the field at fault."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        return PriceTable.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(path, f"cannot read the price table: {exc}", fix="pass a YAML or JSON file") from None
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise DataError(path, f"price table: {'.'.join(map(str, problem['loc']))}: {problem['msg']}",
                        fix="write `models: {MODEL: {input_per_million: X, output_per_million: Y}}`") from None


def priced(table: PriceTable, model: str | None, tokens: Mapping[str, int]) -> dict[str, Any]:
    """One line of the cost section: the model, its tokens and their cost (None, with why, when unpriced)."""
    line: dict[str, Any] = {"model": model, "prompt_tokens": int(tokens.get("prompt_tokens", 0)),
                            "completion_tokens": int(tokens.get("completion_tokens", 0))}
    price = table.models.get(model or "")
    if price is None:
        return {**line, "cost": None, "why": f"no price for model {model!r} in the table"}
    cost = (line["prompt_tokens"] * price.input_per_million + line["completion_tokens"] * price.output_per_million)
    return {**line, "cost": cost / 1e6}


def run_cost(prices: Path, fingerprint: RunFingerprint | None, judges: Sequence[Mapping[str, Any]],
             scored: Sequence[QuestionScore]) -> dict[str, Any]:
    """The ``cost`` section of ``scores.json``: agent, each judge, and the total where every part is priced."""
    table = load_prices(prices)
    agent_tokens = {field: sum(int(getattr(q.usage, field, 0) or 0) for q in scored if q.usage is not None)
                    for field in ("prompt_tokens", "completion_tokens")}
    agent = priced(table, fingerprint.model if fingerprint is not None else None, agent_tokens)
    judged = [{"name": j["name"], **priced(table, j["model"], j.get("tokens") or {})} for j in judges]
    parts = [agent, *judged]
    total = None if any(p["cost"] is None for p in parts) else sum(p["cost"] for p in parts)
    return {"currency": table.currency, "agent": agent, "judges": judged, "total": total,
            "total_why": None if total is not None else "a part has no price: the total would understate"}
