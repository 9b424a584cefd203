"""Acceptance for operations on a real ``relaybox serve``: SIGTERM ends open streams and long polls
cleanly and the process exits 0 at once; with ``RELAYBOX_LOG_FORMAT=json`` every output line is a
JSON object with the request id, and neither a token nor a message's text is ever written."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SERVER_START_TIMEOUT_S, STOP_TIMEOUT_S, TRACEBACK, RelayboxServer
from tests.helpers import FakeDevice, create_token, register_phone

pytestmark = pytest.mark.e2e

REQUEST_TIMEOUT_S = 60.0
WAIT_TIMEOUT_S = 10.0
LISTENING = re.compile(r"^relaybox is listening on (http://\S+)$")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def gauge(http: httpx.Client, name: str) -> float:
    match = re.search(rf"^{name} ([0-9.e+-]+)$", http.get("/metrics").text, re.MULTILINE)
    assert match, name
    return float(match[1])


def wait_for_gauges(http: httpx.Client, **wanted: float) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while any(gauge(http, name) != value for name, value in wanted.items()):
        if time.monotonic() > deadline:
            pytest.fail(f"/metrics never showed {wanted}: {http.get('/metrics').text}")
        time.sleep(0.05)


def in_thread(results: dict[str, Any], name: str, work: Any) -> threading.Thread:
    """Run ``work`` on a thread, keeping its result or its exception under ``name``."""

    def run() -> None:
        try:
            results[name] = work()
        except Exception as error:  # reported by the test's assertions
            results[name] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_sigterm_ends_a_stream_and_a_long_poll_cleanly_and_exits_0_at_once(tmp_path: Path) -> None:
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        with httpx.Client(base_url=url, timeout=WAIT_TIMEOUT_S, trust_env=False) as http:
            phone = register_phone(http)
            token = str(create_token(http, phone)["token"])
            question = http.post("/v1/interactions", json={"question": "deploy?"}, headers=bearer(token))
            interaction_id = question.json()["id"]

            def follow_stream() -> tuple[int, str]:
                with (
                    httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client,
                    client.stream("GET", "/v1/sync", headers=phone.auth) as response,
                ):
                    return response.status_code, "".join(response.iter_text())  # raises if cut

            def long_poll() -> httpx.Response:
                with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client:
                    return client.get(f"/v1/interactions/{interaction_id}?wait=40", headers=bearer(token))

            results: dict[str, Any] = {}
            threads = [in_thread(results, "stream", follow_stream), in_thread(results, "poll", long_poll)]
            wait_for_gauges(http, relaybox_open_streams=1, relaybox_waiting_polls=1)

        signalled = time.monotonic()
        server.process.terminate()
        returncode = server.process.wait(STOP_TIMEOUT_S)
        stopped_after = time.monotonic() - signalled
        for thread in threads:
            thread.join(WAIT_TIMEOUT_S)
        stderr = server.stderr()

    assert returncode == 0, stderr
    assert stopped_after < 3, stderr
    assert not isinstance(results["stream"], Exception), results["stream"]
    status, frames = results["stream"]
    assert status == 200 and frames.startswith(": relaybox stream\n\n")
    assert "interaction_request" in frames  # the question's push entry was replayed before the end
    poll = results["poll"]
    assert isinstance(poll, httpx.Response), poll
    assert poll.status_code == 200 and poll.json()["status"] == "pending"
    assert TRACEBACK not in stderr and "graceful shutdown exceeded" not in stderr


class JsonLogServer(RelayboxServer):
    """``relaybox serve`` with JSON logs: the URL comes in a log record, not a plain line."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, env={"RELAYBOX_LOG_FORMAT": "json"})

    def wait_until_ready(self, timeout: float = SERVER_START_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout
        while not self.url:
            try:
                line = self._stdout.next_line(deadline)
            except TimeoutError:
                pytest.fail(f"no listening record within {timeout} s; stdout: {self.stdout()}")
            if line is None:
                pytest.fail(f"the server ended: {self.stdout()} {self.stderr()}")
            match = LISTENING.match(json.loads(line)["message"])
            if match:
                self.url = match[1]
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while http.get(f"{self.url}/readyz").status_code != 200:  # bounded by the deadline
                if time.monotonic() > deadline:
                    pytest.fail(f"{self.url}/readyz did not answer 200 within {timeout} s")
                time.sleep(0.05)
        return self.url


def send_with_each_form(http: httpx.Client, token: str, text: str) -> list[str]:
    """A send through the capability URL and one with the bearer header; their request ids."""
    ids = []
    for response in (
        http.post(f"/v1/send/{token}", json={"message": f"{text} one", "title": f"{text} title"}),
        http.post("/v1/send", content=f"{text} two", headers=bearer(token)),
    ):
        assert response.status_code == 200, response.text
        ids.append(response.headers["x-request-id"])
    return ids


def test_json_logs_carry_request_ids_and_never_a_token_or_message_text(tmp_path: Path) -> None:
    text = "quarterly-figures-7f3a"
    with JsonLogServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        with httpx.Client(base_url=url, timeout=WAIT_TIMEOUT_S, trust_env=False) as http:
            phone: FakeDevice = register_phone(http)
            token = str(create_token(http, phone)["token"])
            capability_id, bearer_id = send_with_each_form(http, token, text)
            # From loopback, a trusted proxy by default: its X-Forwarded-For names the caller.
            forwarded = {"X-Request-ID": "trace-1234", "X-Forwarded-For": "203.0.113.7"}
            given = http.get("/healthz", headers=forwarded)
            assert given.headers["x-request-id"] == "trace-1234"
        server.stop()
        stdout, stderr = server.stdout(), server.stderr()

    records = [json.loads(line) for line in stdout.splitlines()]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    access = {r["request_id"]: r for r in records if r["logger"] == "uvicorn.access"}
    assert access[capability_id]["route"] == "/v1/send/{token}"
    assert access[capability_id]["message"].endswith('"POST /v1/send/{token} HTTP/1.1" 200')
    assert access[bearer_id]["route"] == "/v1/send" and access[bearer_id]["status"] == 200
    assert access["trace-1234"]["route"] == "/healthz"
    assert access["trace-1234"]["client"].startswith("203.0.113.7")
    for secret in (token, token[len("rfk_live_") :], phone.token, text):
        assert secret not in stdout and secret not in stderr
    assert TRACEBACK not in stdout + stderr
