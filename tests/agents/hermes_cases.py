"""Generations for verl's hermes tool parser: the recorded fixture holds what verl returned for each."""

from __future__ import annotations

CALL = '<tool_call>\n{"name": "search", "arguments": {"query_list": ["capital of France"]}}\n</tool_call>'

CASES: dict[str, str] = {
    "one_call": "<think>I need to look it up.</think>\n" + CALL,
    "no_call": "<think>I know it.</think>\n<answer> Paris </answer>",
    "call_inside_think": '<think>Maybe <tool_call>\n{"name": "search", "arguments": {"query_list": ["x"]}}\n'
                         "</tool_call> would help.</think>\n<answer> Paris </answer>",
    "two_calls": CALL + "\n" + CALL.replace("capital of France", "population of Paris"),
    "only_start_tag": '<tool_call>\n{"name": "search", "arguments": {"query_list": ["x"]}}',
    "only_end_tag": '{"name": "search", "arguments": {"query_list": ["x"]}}\n</tool_call>',
    "invalid_json": "<tool_call>\n{name: search}\n</tool_call>",
    "missing_arguments": '<tool_call>\n{"name": "search"}\n</tool_call>',
    "missing_name": '<tool_call>\n{"arguments": {"query_list": ["x"]}}\n</tool_call>',
    "name_not_a_string": '<tool_call>\n{"name": 7, "arguments": {}}\n</tool_call>',
    "json_list": "<tool_call>\n[1, 2]\n</tool_call>",
    "arguments_a_string": '<tool_call>\n{"name": "search", "arguments": "{\\"query_list\\": [\\"x\\"]}"}\n</tool_call>',
    "non_ascii": '<tool_call>\n{"name": "search", "arguments": {"query_list": ["Zürich café"]}}\n</tool_call>',
    "one_bad_one_good": "<tool_call>not json</tool_call>" + CALL,
    "nested_start": '<tool_call><tool_call>{"name": "search", "arguments": {}}</tool_call>',
    "text_around": "Let me search. " + CALL + " Then answer.<|im_end|>",
    "upper_case_tags": '<TOOL_CALL>{"name": "search", "arguments": {}}</TOOL_CALL>',
    "extra_keys": '<tool_call>{"name": "search", "arguments": {"query_list": ["x"]}, "id": 3}</tool_call>',
    "empty_text": "",
}
