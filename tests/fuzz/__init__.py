"""Fuzzing: schemathesis against the served /openapi.json, Hypothesis against the parsers and wire code.

CI runs a short budget; ``RELAYBOX_FUZZ_EXAMPLES`` raises the example count for a longer run.
"""

from __future__ import annotations

import os

DEFAULT_EXAMPLES = 10


def fuzz_examples(default: int = DEFAULT_EXAMPLES) -> int:
    """Examples per test (per operation for the API): ``RELAYBOX_FUZZ_EXAMPLES`` or ``default``."""
    raw = os.environ.get("RELAYBOX_FUZZ_EXAMPLES", "").strip()
    return int(raw) if raw else default
