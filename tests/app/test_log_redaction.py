"""Secrets never reach a log line: the path-token alias, sender tokens and device credentials."""

from __future__ import annotations

import logging

import pytest

from app.logs import RedactSecrets, log_config
from core.domain.secrets import new_device_credential, new_sender_token
from core.redaction import MAYBE_SECRET, redact


def test_the_path_alias_is_redacted_whatever_the_token_looks_like() -> None:
    assert redact("POST /v1/send/rfk_live_abc HTTP/1.1") == "POST /v1/send/[redacted] HTTP/1.1"
    assert redact("/v1/send/anything?x=1") == "/v1/send/[redacted]?x=1"


def test_the_sequence_a_caller_clears_is_redacted() -> None:
    line = 'DELETE /v1/notifications/prod-db-migration HTTP/1.1" 200'
    assert redact(line) == 'DELETE /v1/notifications/[redacted] HTTP/1.1" 200'
    assert redact("/v1/notifications/s?device=laptop") == "/v1/notifications/[redacted]?device=laptop"


def test_presigned_url_signatures_are_redacted() -> None:
    line = 'PUT /v1/objects/xfr_0/1?size=5&expires=9&signature=AbC-_1 HTTP/1.1" 200'
    assert redact(line) == 'PUT /v1/objects/xfr_0/1?size=5&expires=9&signature=[redacted] HTTP/1.1" 200'
    s3 = "https://b.s3.example/k?X-Amz-Credential=AKIA%2Fx&X-Amz-Signature=abc123&X-Amz-Expires=60"
    assert (
        redact(s3)
        == "https://b.s3.example/k?X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&X-Amz-Expires=60"
    )


def test_token_shaped_secrets_are_redacted_anywhere() -> None:
    token, credential = new_sender_token(), new_device_credential()
    text = redact(f"saw {token} and {credential} in a message")
    assert token not in text and credential not in text
    assert text == "saw [redacted] and [redacted] in a message"


def test_the_quick_check_passes_over_only_text_with_nothing_to_redact() -> None:
    secrets = [
        new_sender_token(),
        new_device_credential(),
        "rfk_test_" + "A" * 32,
        "rbd_" + "a" * 43,
        *(f"rb{kind}_" + "b" * 43 for kind in "acr"),
        "/v1/send/x",
        "/v1/notifications/x",
        "?signature=s",
        "&X-Amz-Signature=s",
        "?x-amz-credential=c",
    ]
    for secret in secrets:
        assert MAYBE_SECRET.search(f"GET {secret} HTTP/1.1") is not None
        assert redact(f"GET {secret} HTTP/1.1") != f"GET {secret} HTTP/1.1"
    for plain in ("POST", "/mcp", "127.0.0.1:5555", "1.1", "/v1/devices?wait=20"):
        assert redact(plain) is plain


def test_uvicorns_access_log_record_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    token = new_sender_token()
    logger = logging.getLogger("uvicorn.access.test")
    logger.addFilter(RedactSecrets())
    with caplog.at_level(logging.INFO, logger="uvicorn.access.test"):
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "POST", f"/v1/send/{token}", "1.1", 200)
    assert token not in caplog.text
    assert "/v1/send/[redacted]" in caplog.text


def test_every_serve_handler_has_the_filter() -> None:
    config = log_config()
    assert config["handlers"]
    assert all(handler["filters"] == ["redact"] for handler in config["handlers"].values())
