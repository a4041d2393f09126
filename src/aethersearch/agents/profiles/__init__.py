"""Agent profiles: each trained agent's contract with its loop, as a validated data file.

Why data: a trained agent is only evaluated faithfully under the loop it was
trained with (prompt, action grammar, stop rules, per-call and per-episode limits,
how observations are written and cut, what ends an episode, how the answer is
read). Held as code defaults and prose, those facts drift: ``aether run --agent
aethersearch`` would silently keep the run's 4-call budget where their loop gives
6 calls and 5 searches. A profile states them once, in a file
shipped here per trainer (``search-r1.json``, ``aethersearch.json``,
``verl-search.json``, ``openai-functions.json``) or written by a user for their own
trainer (``aether run --profile FILE``), validated by :class:`AgentProfile`.

A profile is run by a registered loop (``runner.agent``). The loop's settings that
a profile states in its own fields (observation top-k and cut, per-call tokens,
searches, context limits) are derived from those fields by :data:`DERIVED`, so no
value is written twice; ``runner.settings`` holds only the rest.
``tests/agents/test_profiles.py`` holds every shipped profile to its loop: the
stop strings the loop sends, its limits and its budget. The profile's sha256 (of its
canonical JSON, so reformatting the file changes nothing) goes into ``run.json``,
and ``aether compare`` refuses to mix runs of different profiles.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Any, Literal, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aethersearch.config_files import read_mapping
from aethersearch.errors import ConfigError
from aethersearch.records import Budget

__all__ = ["AGENT_PROFILES", "DERIVED", "AgentProfile", "LoadedProfile", "load_profile", "packaged_profile",
           "profile_for_agent", "profile_names"]

PROFILE_SCHEMA_VERSION = 1


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PromptSpec(_Part):
    """The user turn and how it reaches the model."""

    template: str = Field(description="the prompt text; {question} is replaced by the question")
    chat_template: Literal["served", "auto", "none"] = Field(
        description="served: wrapped in the served model's chat template with the generation prompt; auto: "
                    "that when the server reports a template, else raw; none: raw")


class ActionSpec(_Part):
    """One model generation: its grammar, what stops it, how long it may be."""

    grammar: Literal["search-r1-tags", "aethersearch-tags", "hermes-tool-calls", "openai-function-calling"]
    stop: list[str] = Field(description="stop strings sent with every call (empty: end-of-sequence only)")
    max_tokens: int = Field(ge=1, description="new tokens per model call")


class ObservationSpec(_Part):
    """What a search returns to the model."""

    format: str = Field(description="how the documents are written back, in words")
    topk: int = Field(ge=1, description="documents per search")
    max_tokens: int | None = Field(ge=1, description="the observation's token cap (None: no token cap)")
    max_chars: int | None = Field(default=None, ge=1, description="its character cap (verl's "
                                                                  "max_tool_response_length; None: none)")
    truncation: Literal["keep-start", "body-cut-tags-kept", "keep-both-ends", "none"] = Field(
        description="keep-start: the text past the cap is dropped; body-cut-tags-kept: the body is cut so the "
                    "tags fit; keep-both-ends: the middle is replaced by '...(truncated)...'")


class ContextSpec(_Part):
    """The token limits of the whole episode."""

    max_prompt_tokens: int | None = Field(ge=1)
    max_response_tokens: int | None = Field(default=None, ge=1)
    max_context_tokens: int | None = Field(default=None, ge=1)
    cut: Literal["left", "never"] = Field(description="left: the oldest context is dropped to fit; never")


class BudgetSpec(_Part):
    """Model calls and searches per episode: the run's budget unless a flag overrides it."""

    max_turns: int | None = Field(ge=1, description="model calls per episode")
    max_tool_calls: int | None = Field(ge=1, description="searches (tool calls) per episode")

    def as_budget(self) -> Budget:
        """The runner's :class:`~aethersearch.records.Budget` for these limits."""
        return Budget(max_tool_calls=self.max_tool_calls, max_turns=self.max_turns)


class RunnerSpec(_Part):
    """The registered loop that runs this profile and its settings not stated elsewhere in the profile."""

    agent: str
    settings: dict[str, Any] = Field(default_factory=dict)


EndRule = Literal["answer", "first_invalid_action", "max_turns", "max_searches", "token_cap",
                  "reply_without_tool_call"]
AnswerRule = Literal["last-answer-tag", "terminal-valid-answer", "final-message"]


class AgentProfile(_Part):
    """One trainer's agent contract (the schema every profile file is validated by)."""

    schema_version: Literal[1] = 1
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    trainer: str = Field(description="who trains agents this way, and where (repository, file, commit)")
    prompt: PromptSpec
    actions: ActionSpec
    observation: ObservationSpec
    context: ContextSpec
    budget: BudgetSpec
    ends_episode: list[EndRule] = Field(min_length=1)
    answer: AnswerRule
    runner: RunnerSpec


#: ``--agent NAME`` -> the shipped profile it follows (an agent without one runs with the run's own defaults)
AGENT_PROFILES: dict[str, str] = {"search-r1": "search-r1", "aethersearch": "aethersearch",
                                  "react": "openai-functions", "verl-search": "verl-search"}

#: loop -> {its setting: the profile field (dotted) it is derived from}
DERIVED: dict[str, dict[str, str]] = {
    "aethersearch": {"topk": "observation.topk", "max_searches": "budget.max_tool_calls",
                     "max_action_tokens": "actions.max_tokens", "max_information_tokens": "observation.max_tokens",
                     "max_prompt_tokens": "context.max_prompt_tokens",
                     "max_response_tokens": "context.max_response_tokens",
                     "max_context_tokens": "context.max_context_tokens"},
    "search-r1": {"topk": "observation.topk", "max_obs_tokens": "observation.max_tokens",
                  "max_prompt_tokens": "context.max_prompt_tokens"},
    "react": {"topk": "observation.topk", "max_obs_tokens": "observation.max_tokens"},
    "verl-search": {"topk": "observation.topk", "max_assistant_turns": "budget.max_turns",
                    "max_tool_response_length": "observation.max_chars",
                    "response_length": "context.max_response_tokens"},
}


def _field(profile: AgentProfile, dotted: str) -> Any:
    value: Any = profile
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


class LoadedProfile(NamedTuple):
    """A validated profile, where it came from and its sha256."""

    profile: AgentProfile
    source: str
    sha256: str

    def agent_settings(self) -> dict[str, Any]:
        """The loop's settings: those derived from the profile's fields, then ``runner.settings``."""
        derived = {setting: _field(self.profile, dotted)
                   for setting, dotted in DERIVED.get(self.profile.runner.agent, {}).items()}
        return {**derived, **self.profile.runner.settings}

    def record(self) -> dict[str, Any]:
        """What ``run.json`` records of the profile (``profile``)."""
        return {"name": self.profile.name, "source": self.source, "sha256": self.sha256,
                "budget": self.profile.budget.as_budget().model_dump(mode="json")}


def _validated(data: dict[str, Any], where: str) -> LoadedProfile:
    try:
        profile = AgentProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(f"{where}: agent profile field {field!r}: {first['msg']}",
                          fix="see the shipped profiles in aethersearch/agents/profiles/ and "
                              "docs/aethersearch-compat.md#agent-profiles") from None
    clash = sorted(set(DERIVED.get(profile.runner.agent, {})) & set(profile.runner.settings))
    if clash:
        raise ConfigError(f"{where}: runner.settings sets {', '.join(clash)}, which the profile states in its own "
                          f"fields ({', '.join(DERIVED[profile.runner.agent][c] for c in clash)})",
                          fix="set each value once, in the profile field")
    canonical = orjson.dumps(profile.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    return LoadedProfile(profile, where, hashlib.sha256(canonical).hexdigest())


def load_profile(path: Path) -> LoadedProfile:
    """A user's profile file (YAML or JSON), validated; a bad field is a ConfigError naming it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"agent profile {path} does not exist",
                          fix="pass a profile file (see the shipped ones in aethersearch/agents/profiles/)")
    return _validated(read_mapping(path, what="agent profile"), str(path))


def profile_names() -> list[str]:
    """The shipped profiles' names."""
    return sorted(p.name.removesuffix(".json") for p in resources.files(__name__).iterdir()
                  if p.name.endswith(".json"))


def packaged_profile(name: str) -> LoadedProfile | None:
    """The shipped profile called ``name`` (an agent's name: ``aethersearch``, ``search-r1``), or None."""
    if name not in profile_names():
        return None
    data = orjson.loads(resources.files(__name__).joinpath(f"{name}.json").read_bytes())
    return _validated(data, f"package:{name}")


def profile_for_agent(agent: str) -> LoadedProfile | None:
    """The shipped profile ``--agent NAME`` follows (:data:`AGENT_PROFILES`), or None."""
    name = AGENT_PROFILES.get(agent)
    return None if name is None else packaged_profile(name)
