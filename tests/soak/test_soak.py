"""The soak on a short budget (about 20 s): mixed traffic with the rate limits on ends with zero 5xx,
zero 429s, zero lost envelopes, memory flat within the bound, and every stream let go."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.soak.soak import SoakConfig, run_soak

pytestmark = pytest.mark.e2e

DURATION_S = float(os.environ.get("RELAYBOX_SOAK_SECONDS", "15"))


def test_a_short_soak_keeps_every_promise(tmp_path: Path, summary: Callable[[str], None]) -> None:
    result = run_soak(SoakConfig(duration_s=DURATION_S, callers=4), tmp_path)
    summary(result.summary_line())
    assert not result.problems(), result.summary_line()
    assert result.count("2") > 0 and result.statuses["mcp ok"] > 0
