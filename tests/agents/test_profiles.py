"""Agent profiles: the schema refuses what is not a contract, and every shipped profile holds its loop to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aethersearch.agents.base import make_agent
from aethersearch.agents.profiles import (
    AGENT_PROFILES,
    DERIVED,
    load_profile,
    packaged_profile,
    profile_for_agent,
    profile_names,
)
from aethersearch.agents.prompts import SEARCH_R1_PROMPT
from aethersearch.errors import ConfigError
from aethersearch.records import Decoding


def test_every_agent_profile_is_shipped_and_valid() -> None:
    assert set(AGENT_PROFILES.values()) <= set(profile_names())
    for name in profile_names():
        loaded = packaged_profile(name)
        assert loaded is not None and loaded.profile.name == name and len(loaded.sha256) == 64


@pytest.mark.parametrize("agent", sorted(AGENT_PROFILES))
def test_a_shipped_profile_states_what_its_loop_does(agent: str) -> None:
    loaded = profile_for_agent(agent)
    assert loaded is not None
    profile = loaded.profile
    built = make_agent(profile.runner.agent, **loaded.agent_settings())
    assert built.effective_decoding(Decoding()).stop == profile.actions.stop  # the stop strings really sent
    config = built.config()
    for setting, dotted in DERIVED[profile.runner.agent].items():
        assert config[setting] == loaded.agent_settings()[setting], dotted
    assert profile.prompt.template in (built.prompt_template() or "")  # the prompt the loop hashes


def test_the_aethersearch_profile_is_their_loop() -> None:
    loaded = profile_for_agent("aethersearch")
    assert loaded is not None
    profile = loaded.profile
    # configs/base.yaml at d2a21bd: 5 search turns (so 6 generations), 500-token actions and observations
    assert (profile.budget.max_turns, profile.budget.max_tool_calls) == (6, 5)
    assert profile.actions.max_tokens == 500 and profile.observation.max_tokens == 500
    assert profile.actions.stop == [] and "first_invalid_action" in profile.ends_episode
    assert profile.observation.truncation == "body-cut-tags-kept" and profile.context.cut == "never"
    assert profile.prompt.template == SEARCH_R1_PROMPT and profile.prompt.chat_template == "served"
    defaults = make_agent("aethersearch").config()
    assert {k: v for k, v in loaded.agent_settings().items() if k in defaults} == \
        {k: defaults[k] for k in loaded.agent_settings() if k in defaults}


def test_the_hash_ignores_formatting_but_not_content(tmp_path: Path) -> None:
    shipped = packaged_profile("aethersearch")
    assert shipped is not None
    data = json.loads(Path(__file__).parents[2].joinpath(
        "src/aethersearch/agents/profiles/aethersearch.json").read_text())
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(data, separators=(",", ":")))
    assert load_profile(compact).sha256 == shipped.sha256
    data["budget"]["max_turns"] = 7
    changed = tmp_path / "changed.yaml"
    changed.write_text(json.dumps(data))
    assert load_profile(changed).sha256 != shipped.sha256


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["actions"].update(grammar="xml-calls"), "actions.grammar"),
    (lambda d: d.update(colour="red"), "colour"),
    (lambda d: d["budget"].update(max_turns=0), "budget.max_turns"),
    (lambda d: d.pop("ends_episode"), "ends_episode"),
    (lambda d: d["runner"]["settings"].update(topk=5), "runner.settings sets topk"),
])
def test_a_bad_profile_is_refused_naming_its_field(tmp_path: Path, edit, field: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(Path(__file__).parents[2].joinpath(
        "src/aethersearch/agents/profiles/aethersearch.json").read_text())
    edit(data)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="mine.json") as raised:
        load_profile(path)
    assert field in str(raised.value) and raised.value.fix


def test_a_missing_profile_file_is_a_message(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_profile(tmp_path / "nope.yaml")
