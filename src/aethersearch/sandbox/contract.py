"""The sandbox's contract as a run records it: which mask policy served the pages, with which tools.

Why a named policy: a WebDetective figure means something only under the
masking rules it was measured with (``sandbox.mask``: chain pages locked until
their predecessor was visited, mentions of a chain page withheld everywhere but
on its predecessor, snippets masked by the episode's unlock state). The name
below changes whenever those rules change what an agent can see, so two runs
served under different rules are never compared as checkpoints: the record goes
into ``run.json`` (``RunFingerprint.sandbox``) and is part of the contract.
"""

from __future__ import annotations

from collections.abc import Sequence

from aethersearch.records import SandboxContract

__all__ = ["MASK_POLICY", "SANDBOX_SERVICE", "sandbox_contract"]

#: The masking rules of ``sandbox.mask`` and the snippet rules of ``sandbox.serving``, by version.
#: v2: a snippet is cut at a word boundary and masked again after the cut (v1's 240-character cut could
#: print a locked page's name, 9 times in 4,004 searches on the real Wikispeedia release).
MASK_POLICY = "webdetective-chain-lock/v2"
#: What ``aether sandbox serve`` calls itself in ``/health`` (so a client can tell it from a retrieval server).
SANDBOX_SERVICE = "aethersearch-sandbox"


def sandbox_contract(tools: Sequence[str] = ("search", "visit")) -> SandboxContract:
    """The record of this sandbox's policy for ``run.json``."""
    return SandboxContract(mask_policy=MASK_POLICY, tools=list(tools))
