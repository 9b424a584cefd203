"""The gate reads a request's headers in one pass: values stripped of surrounding spaces and tabs
(uvicorn's httptools parser keeps trailing ones), and the first ``Authorization`` among them."""

from __future__ import annotations

from connector.auth_gate import _bearer_token, _stripped


def test_clean_headers_are_the_same_list_and_the_first_authorization_is_found() -> None:
    headers = [
        (b"host", b"relay.example"),
        (b"authorization", b"Bearer rba_a"),
        (b"authorization", b"Bearer rba_b"),
    ]
    stripped, authorization = _stripped(headers)
    assert stripped is headers
    assert authorization == b"Bearer rba_a"
    assert _bearer_token(authorization) == "rba_a"


def test_padded_values_are_stripped_the_authorization_with_them() -> None:
    headers = [(b"mcp-name", b"list_devices \t"), (b"authorization", b"Bearer rba_a ")]
    stripped, authorization = _stripped(headers)
    assert stripped == [(b"mcp-name", b"list_devices"), (b"authorization", b"Bearer rba_a")]
    assert _bearer_token(authorization) == "rba_a"


def test_no_authorization_or_another_scheme_is_no_bearer_token() -> None:
    assert _stripped([(b"host", b"relay.example ")]) == ([(b"host", b"relay.example")], None)
    assert _bearer_token(None) is None
    assert _bearer_token(b"Basic abc") is None
    assert _bearer_token(b"Bearer ") is None
