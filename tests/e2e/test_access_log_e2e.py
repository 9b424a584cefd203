"""The access log writes a request's path, never its query string: the Pushover shim takes its whole
message, and the token, as query fields (``POST /v1/messages.json?token=…&message=…``), and so do
callers of any route that pass a stray query. Checked on a real ``relaybox serve`` in both log
formats, on everything it writes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import RelayboxServer

pytestmark = pytest.mark.e2e

MARKER = "QUERY-MARKER-5b0e"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_query_string_reaches_the_log(tmp_path: Path, log_format: str) -> None:
    with RelayboxServer(tmp_path, env={"RELAYBOX_LOG_FORMAT": log_format}) as server:
        url = server.wait_until_ready()
        with httpx.Client(base_url=url, timeout=10, trust_env=False) as http:
            token = "rfk_live_" + "A" * 32  # well formed, unknown: refused after the query is read
            shim = http.post(f"/v1/messages.json?token={token}&message={MARKER}&title={MARKER}")
            assert shim.status_code == 401
            assert http.get(f"/healthz?probe={MARKER}").status_code == 200
            assert http.get(f"/nowhere?q={MARKER}").status_code == 404
        deadline = time.monotonic() + 5
        while server.stdout().count("HTTP/1.1") < 3 and time.monotonic() < deadline:  # all three logged
            time.sleep(0.05)
        written = server.stdout() + server.stderr()
    assert written.count("HTTP/1.1") >= 3 and "/v1/messages.json" in written  # the access log is there
    assert MARKER not in written and token not in written
    if log_format == "json":
        access = [json.loads(line) for line in written.splitlines() if '"uvicorn.access"' in line]
        assert access and all("?" not in record["message"] for record in access)
