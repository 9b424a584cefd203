"""Traffic against a real server for the fault and load checks: an account (a phone, a paired
computer, a sender token), relayed envelopes, questions and their long polls, the server's gauges,
and a device following its stream with the reference client (``client.sync_follower.SyncFollower``: it
reconnects with ``Last-Event-ID`` after any drop, as a real device does)."""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from client.sync_follower import Backoff, SyncEvent, SyncFollower
from core.domain.envelope import seal
from tests.helpers import FakeDevice, create_token, pair_computer, register_phone

# Streams send a keep-alive this often in these tests, so a follower notices a stop request quickly.
FAST_KEEPALIVE_ENV = {"RELAYBOX_STREAM_KEEPALIVE_S": "1"}


@dataclass
class Account:
    phone: FakeDevice
    computer: FakeDevice
    token: str  # a sender token with phone:control

    @property
    def token_auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def make_account(http: httpx.Client) -> Account:
    phone = register_phone(http, app_build=100)
    computer = pair_computer(http, phone)
    token = str(create_token(http, phone, scope="phone:control")["token"])
    return Account(phone, computer, token)


def post_envelope(http: httpx.Client, sender: FakeDevice, recipient: FakeDevice) -> httpx.Response:
    """A clipboard envelope sealed from ``sender`` to ``recipient``; 202 carries its ``seq``."""
    blob = seal(b'{"type":"clipboard","text":"x"}', sender.secret_key, recipient.public_key)
    body = {"to": recipient.device_id, "type": "clipboard", "blob": base64.b64encode(blob).decode()}
    return http.post("/v1/envelopes", json=body, headers=sender.auth)


def gauge(http: httpx.Client, name: str) -> float:
    """A gauge from ``/metrics`` (``relaybox_open_streams``, ``relaybox_waiting_polls``)."""
    text = http.get("/metrics").text
    match = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match[1])


def eventually(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


class _Stopped(Exception):  # noqa: N818 - a signal, not an error
    pass


@dataclass
class Follower:
    """A device following its own stream in a thread; ``seqs`` are the envelope ids, in order."""

    server: str
    device: FakeDevice
    after: int = 0
    seqs: list[int] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._follower = SyncFollower(
            self.server,
            self.device.token,
            after=self.after,
            read_timeout=10,
            backoff=Backoff(0.1, 1.0),
            sleep=self._sleep,
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        return self._follower.connections

    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise _Stopped

    def _run(self) -> None:
        try:
            for item in self._follower.events():
                if self._stop.is_set():
                    return
                if isinstance(item, SyncEvent) and item.event == "envelope" and not item.live:
                    self.seqs.append(item.seq)
        except _Stopped:
            pass
        except BaseException as error:  # reported by the test, never swallowed
            if not self._stop.is_set():
                self.error = error

    def wait_for(self, seqs: set[int], timeout: float) -> None:
        eventually(
            lambda: seqs <= set(self.seqs) or self.error is not None, timeout, "the follower saw every seq"
        )
        assert self.error is None, self.error

    def close(self) -> None:
        self._stop.set()
        self._follower.close()
        self._thread.join(15)


class LongPoll:
    """``GET /v1/interactions/{id}?wait=30`` in a thread: its response, or the error it ended with."""

    def __init__(self, url: str, account: Account, interaction_id: str) -> None:
        self.outcome: httpx.Response | Exception | None = None
        self.ended_at = 0.0

        def poll() -> None:
            with httpx.Client(base_url=url, timeout=40, trust_env=False) as http:
                try:
                    self.outcome = http.get(
                        f"/v1/interactions/{interaction_id}", params={"wait": 30}, headers=account.token_auth
                    )
                except httpx.HTTPError as error:
                    self.outcome = error
            self.ended_at = time.monotonic()

        self.thread = threading.Thread(target=poll, daemon=True)
        self.thread.start()

    def result(self, timeout: float) -> httpx.Response | Exception:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the long poll still hangs after {timeout} s"
        assert self.outcome is not None
        return self.outcome


def ask(http: httpx.Client, account: Account, question: str) -> str:
    response = http.post("/v1/interactions", json={"question": question}, headers=account.token_auth)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def answer(http: httpx.Client, account: Account, interaction_id: str, choice: int) -> None:
    response = http.post(
        f"/v1/interactions/{interaction_id}/answer", json={"choice_index": choice}, headers=account.phone.auth
    )
    assert response.status_code == 200, response.text
