"""The gate reads a request's headers in one pass: values stripped of surrounding spaces and tabs
(uvicorn's httptools parser keeps trailing ones), the first ``Authorization`` among them, and what
it passes on to the transport has no ``Authorization``."""

from __future__ import annotations

from connector.auth_gate import _bearer_token, _passed_on


def test_clean_headers_without_authorization_are_the_same_list() -> None:
    headers = [(b"host", b"relay.example"), (b"accept", b"application/json")]
    assert _passed_on(headers) == (headers, None)
    assert _passed_on(headers)[0] is headers


def test_the_authorization_is_found_and_not_passed_on() -> None:
    headers = [(b"host", b"relay.example"), (b"authorization", b"Bearer rba_a"), (b"mcp-name", b"x")]
    passed, authorization = _passed_on(headers)
    assert passed == [(b"host", b"relay.example"), (b"mcp-name", b"x")]
    assert headers[1] == (b"authorization", b"Bearer rba_a")  # the caller's list is left as it was
    assert _bearer_token(authorization) == "rba_a"


def test_of_several_authorizations_the_first_is_read_and_none_passed_on() -> None:
    headers = [
        (b"authorization", b"Bearer rba_a"),
        (b"host", b"relay.example"),
        (b"authorization", b"Bearer rba_b"),
    ]
    assert _passed_on(headers) == ([(b"host", b"relay.example")], b"Bearer rba_a")


def test_padded_values_are_stripped_the_authorization_with_them() -> None:
    headers = [(b"mcp-name", b"list_devices \t"), (b"authorization", b"Bearer rba_a ")]
    passed, authorization = _passed_on(headers)
    assert passed == [(b"mcp-name", b"list_devices")]
    assert _bearer_token(authorization) == "rba_a"


def test_no_authorization_or_another_scheme_is_no_bearer_token() -> None:
    assert _passed_on([(b"host", b"relay.example ")]) == ([(b"host", b"relay.example")], None)
    assert _bearer_token(None) is None
    assert _bearer_token(b"Basic abc") is None
    assert _bearer_token(b"Bearer ") is None
