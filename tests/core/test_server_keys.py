"""The server key: replicas (a Redis URL) without a configured key are warned that theirs differ;
sealing one plaintext to several devices at once."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from core.domain.envelope import NONCE_LENGTH, open_envelope
from core.domain.keys import generate_keypair
from core.server_keys import ServerKeys, load_server_keys
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


def test_sealing_to_several_devices_gives_each_its_own_envelope_and_nonce() -> None:
    keys = ServerKeys.from_secret(generate_keypair()[0])
    devices = [generate_keypair() for _ in range(3)]
    public_keys = [public for _, public in devices]
    sealed = keys.seal_each([*public_keys, public_keys[0]], b"same text")  # a device twice: two nonces
    secrets = [secret for secret, _ in devices] + [devices[0][0]]
    server = keys.public_key
    opened = [open_envelope(blob, secret, server) for blob, secret in zip(sealed, secrets, strict=True)]
    assert opened == [b"same text"] * 4
    assert len({blob[1 : 1 + NONCE_LENGTH] for blob in sealed}) == 4
    assert keys.seal_each([], b"x") == []
