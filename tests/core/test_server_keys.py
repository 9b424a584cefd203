"""The server key: replicas (a Redis URL) without a configured key are warned that theirs differ."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from core.domain.keys import generate_keypair
from core.server_keys import load_server_keys
from core.settings import explicit_settings

REDIS = "redis://127.0.0.1:6379/15"  # never connected to here


def test_a_replica_without_a_configured_key_is_told_every_replica_needs_the_same(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="relaybox.core"):
        load_server_keys(explicit_settings(data_dir=tmp_path, redis_url=REDIS))
    assert any("RELAYBOX_SERVER_SECRET_KEY" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("configured", [True, False], ids=["key-configured", "single-process"])
def test_a_configured_key_or_a_single_process_is_not_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, configured: bool
) -> None:
    key = base64.b64encode(generate_keypair()[0]).decode()
    settings = (
        explicit_settings(data_dir=tmp_path, redis_url=REDIS, server_secret_key=key)
        if configured
        else explicit_settings(data_dir=tmp_path)
    )
    with caplog.at_level(logging.WARNING, logger="relaybox.core"):
        keys = load_server_keys(settings)
    assert not caplog.records
    if configured:
        assert base64.b64encode(keys.secret_key).decode() == key
