"""Answer and protocol kinds for the AetherSearch scorer parity table.

Each kind turns a gold alias list into the action texts one episode produced.
The recorded fixture (``fixtures/aethersearch_parity.json.gz``) holds, for each
real gold × kind, the actions and what AetherSearch's own
``score_trajectory_outcome`` (commit d2a21bd) returned for them; the kinds here
only regenerate the table when it is recorded again.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

Kind = Callable[[list[str]], list[str]]

THINK = "<think>I should answer.</think>\n"


def _answer(text: str) -> list[str]:
    return [f"{THINK}<answer> {text} </answer>"]


def _tokens(gold: str) -> list[str]:
    return gold.split() or [gold]


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


ANSWER_KINDS: dict[str, Kind] = {
    "exact": lambda g: _answer(g[0]),
    "upper": lambda g: _answer(g[0].upper()),
    "article_the": lambda g: _answer("the " + g[0]),
    "article_a": lambda g: _answer("a " + g[0]),
    "trailing_period": lambda g: _answer(g[0] + "."),
    "quoted": lambda g: _answer(f'"{g[0]}"'),
    "curly_quoted": lambda g: _answer(f"\u201c{g[0]}\u201d"),
    "extra_words": lambda g: _answer(g[0] + " is the answer"),
    "first_token": lambda g: _answer(_tokens(g[0])[0]),
    "last_token": lambda g: _answer(_tokens(g[0])[-1]),
    "reversed_tokens": lambda g: _answer(" ".join(reversed(_tokens(g[0])))),
    "repeated_tokens": lambda g: _answer(" ".join(t + " " + t for t in _tokens(g[0]))),
    "wrong": lambda g: _answer("zzqx unrelated"),
    "only_punctuation": lambda g: _answer("?!..."),
    "hyphen_joined": lambda g: _answer("-".join(_tokens(g[0]))),
    "underscore_joined": lambda g: _answer("_".join(_tokens(g[0]))),
    "newlines_inside": lambda g: _answer("\n".join(_tokens(g[0]))),
    "tabs_inside": lambda g: _answer("\t".join(_tokens(g[0]))),
    "nbsp_inside": lambda g: _answer("\u00a0".join(_tokens(g[0]))),
    "accents_stripped": lambda g: _answer(_strip_accents(g[0])),
    "nfkd": lambda g: _answer(unicodedata.normalize("NFKD", g[0])),
    "last_alias": lambda g: _answer(g[-1]),
    "two_aliases_and": lambda g: _answer(f"{g[0]} and {g[-1]}"),
    "half_of_gold": lambda g: _answer(g[0][: max(1, len(g[0]) // 2)]),
    "ampersand": lambda g: _answer(g[0].replace(" and ", " & ")),
    "with_code_tag": lambda g: _answer(g[0] + " <code>x"),
    "closing_before_opening_code": lambda g: _answer(g[0] + " </code><code>"),
    "balanced_tool_call": lambda g: _answer(g[0] + " <tool_call>x</tool_call>"),
    "alias_split_marker": lambda g: _answer(g[0] + "<|answer_split|>zzqx"),
    "think_inside_answer": lambda g: [f"<answer>{g[0]}<think>so</think></answer>"],
    "number_word": lambda g: _answer("one " + g[0]),
}

PROTOCOL_KINDS: dict[str, Kind] = {
    "no_think": lambda g: [f"<answer>{g[0]}</answer>"],
    "two_answer_tags": lambda g: [f"{THINK}<answer>{g[0]}</answer><answer>{g[0]}</answer>"],
    "text_after_answer": lambda g: [f"{THINK}<answer>{g[0]}</answer> Hope this helps."],
    "upper_case_tags": lambda g: [f"<THINK>ok</THINK><ANSWER>{g[0]}</ANSWER>"],
    "mixed_case_tags": lambda g: [f"<Think>ok</Think><Answer>{g[0]}</Answer>"],
    "model_writes_information": lambda g: [f"{THINK}<information>{g[0]}</information><answer>{g[0]}</answer>"],
    "unclosed_answer": lambda g: [f"{THINK}<answer>{g[0]}"],
    "text_before_think": lambda g: [f"Sure. {THINK}<answer>{g[0]}</answer>"],
    "search_then_answer": lambda g: [f"{THINK}<search>who is it</search>", f"{THINK}<answer>{g[0]}</answer>"],
    "invalid_then_answer": lambda g: ["I will think first.", f"{THINK}<answer>{g[0]}</answer>"],
    "answer_then_search": lambda g: [f"{THINK}<answer>{g[0]}</answer>", "<search>more</search>"],
    "two_answer_actions": lambda g: ["<answer>zzqx</answer>", f"<answer>{g[0]}</answer>"],
    "answer_before_think": lambda g: [f"<answer>{g[0]}</answer><think>done</think>"],
    "empty_search_then_answer": lambda g: ["<search>  </search>", f"<answer>{g[0]}</answer>"],
    "nested_in_think": lambda g: [f"<think><answer>{g[0]}</answer></think>"],
    "only_searches": lambda g: ["<search>a</search>", "<search>b</search>"],
    "empty_trajectory": lambda g: [],
    "surrounding_whitespace": lambda g: [f"\n {THINK}\n\n<answer>{g[0]}</answer>\n"],
    "two_think_tags": lambda g: [f"{THINK}{THINK}<answer>{g[0]}</answer>"],
    "wrote_past_search": lambda g: [f"{THINK}<search>q</search>\nLet me wait.", f"<answer>{g[0]}</answer>"],
    "search_and_answer_in_one": lambda g: [f"<search>q</search><answer>{g[0]}</answer>"],
    "empty_answer": lambda g: [f"{THINK}<answer>   </answer>"],
    "repeated_queries": lambda g: ["<search>Same  Query</search>", "<search>same query</search>",
                                   f"<answer>{g[0]}</answer>"],
    "five_searches": lambda g: [f"<search>q{i}</search>" for i in range(5)] + [f"<answer>{g[0]}</answer>"],
    "unbalanced_think": lambda g: [f"<think>a<think>b</think><answer>{g[0]}</answer>"],
    "information_in_answer": lambda g: [f"<answer>{g[0]} </information></answer>"],
    "stop_string_kept_eos_dropped": lambda g: [f"{THINK}<search>q</search>", f"<answer>{g[0]}</answer>"],
    "kelvin_sign_tag": lambda g: [f"<thin\u212a>x</think><answer>{g[0]}</answer>"],
}

ALL_KINDS: dict[str, Kind] = {**ANSWER_KINDS, **PROTOCOL_KINDS}
