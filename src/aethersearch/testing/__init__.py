"""Test doubles shipped on purpose, for the project's tests, its benchmarks and users' own tests.

``testing.scripted_server`` is a scripted OpenAI-compatible LLM server on
loopback (real HTTP, seeded faults). Nothing under ``aethersearch`` outside this
package imports it (``tests/test_architecture.py`` enforces that), so no product
path can end up talking to a double.
"""

__all__: list[str] = []
