"""The rounds of ``stream.py``, each against N open streams, every delivered event checked:

- a fan-out round: the phone's sender token sends ONE notification (``POST /v1/send``) to the
  account, which is the phone and the N computers; the time that counts runs from the send's answer
  (its 200 read) until the LAST of the N streams has yielded the notification;
- a relay round (``--relays``): the phone relays one sealed envelope to every computer
  (``POST /v1/envelopes``, at most C in flight); what counts is the first POST until the last
  stream has its envelope.

The scripts import it as ``fanout`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass

import checks
from core.domain.envelope import open_envelope, seal
from devices import SEND_BODY, Account, Device, b64
from followers import Event, Follower
from harness import BenchError, Server
from http1 import Pool
from meter import CpuMeter, CpuUse


@dataclass(frozen=True)
class Round:
    kind: str  # "fan-out" or "relay"
    requests: int  # the POSTs the round made
    started: float  # perf_counter: the send's answer (fan-out), the first POST (relay)
    request_s: list[float]  # each POST's round trip
    arrivals_s: list[float]  # per stream: its event's arrival - started
    cpu: CpuUse

    @property
    def all_s(self) -> float:
        """From ``started`` until the last stream had its event."""
        return max(self.arrivals_s)


def check_event(event: Event, follower: Follower, kind: str, sender: str) -> dict[str, str]:
    """The event is an envelope of ``kind`` from ``sender``; its JSON data."""
    data = json.loads(event.data)
    if event.kind != "envelope" or data.get("type") != kind or data.get("from") != sender:
        raise BenchError(f"{follower.device.device_id}: unexpected event {event.kind} {event.data[:200]}")
    if data.get("seq") != event.seq:
        raise BenchError(f"{follower.device.device_id}: the event's id {event.seq} is not its seq: {data}")
    checked: dict[str, str] = data
    return checked


def check_notification(event: Event, follower: Follower, msg_id: str) -> None:
    """The event is the notification ``msg_id``, sealed by the server to this very device."""
    data = check_event(event, follower, "notification", "server")
    device = follower.device
    payload = json.loads(
        open_envelope(base64.b64decode(data["blob"]), device.secret_key, device.server_public_key)
    )
    if payload.get("id") != msg_id or payload.get("message") != SEND_BODY["message"]:
        raise BenchError(f"{device.device_id}: the notification opened to {payload}")


async def fan_out_round(
    server: Server, account: Account, followers: list[Follower], timeout_s: float
) -> Round:
    """One send to the whole account; every stream's next event is that notification."""
    marks = [len(follower.events) for follower in followers]
    meter = CpuMeter([server.pid])
    api = Pool(server.address, timeout_s=30)
    try:
        start = meter.snapshot()
        sent, posted, answered = await api.call(
            "POST", "/v1/send", account.sender_token, SEND_BODY, 200, checks.SENT
        )
        events = await asyncio.gather(*(f.event(m, timeout_s) for f, m in zip(followers, marks, strict=True)))
        cpu = meter.since(start)
    finally:
        api.close()
    if not checks.sent_to(account.devices)(sent):
        raise BenchError(f"the send did not reach all {account.devices} devices: {str(sent)[:300]}")
    for follower, event in zip(followers, events, strict=True):
        check_notification(event, follower, sent["id"])
    arrivals = [event.at - answered for event in events]
    return Round("fan-out", 1, answered, [answered - posted], arrivals, cpu)


async def relay_round(
    server: Server, phone: Device, followers: list[Follower], concurrency: int, timeout_s: float, number: int
) -> Round:
    """The phone relays one sealed envelope to every computer; each stream's next event is its own."""
    blobs = [
        b64(seal(f"clipboard {number}/{i}".encode(), phone.secret_key, f.device.public_key))
        for i, f in enumerate(followers)
    ]
    marks = [len(follower.events) for follower in followers]
    posts: list[float] = [0.0] * len(followers)
    arrivals: list[float] = [0.0] * len(followers)
    gate = asyncio.Semaphore(concurrency)
    api = Pool(server.address)  # a fresh one each round: uvicorn closes connections idle for 30 s
    meter = CpuMeter([server.pid])
    start = meter.snapshot()
    first_post = time.perf_counter()

    async def deliver(index: int) -> None:
        follower = followers[index]
        async with gate:
            body = {"to": follower.device.device_id, "type": "clipboard", "blob": blobs[index]}
            accepted, sent, done = await api.call(
                "POST", "/v1/envelopes", phone.token, body, 202, checks.ENVELOPE
            )
            posts[index] = done - sent
        event = await follower.event(marks[index], timeout_s)
        data = check_event(event, follower, "clipboard", phone.device_id)
        if event.seq != accepted["seq"] or data.get("blob") != blobs[index]:
            raise BenchError(
                f"{follower.device.device_id}: got {event.data[:200]}, not seq {accepted['seq']}"
            )
        arrivals[index] = event.at - first_post

    try:
        async with asyncio.TaskGroup() as group:
            for index in range(len(followers)):
                group.create_task(deliver(index))
    finally:
        api.close()
    return Round("relay", len(followers), first_post, posts, arrivals, meter.since(start))
