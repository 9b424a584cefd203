"""Setting up the devices a benchmark run needs, over relaybox's HTTP API with the checked raw client
(``http1.Pool``): the request bodies that register a phone and pair a computer with it, a phone
with N paired computers and a sender token, and the check that a send reaches each of them.

The scripts import it as ``devices`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import checks
from core.domain.keys import generate_keypair
from harness import BenchError, Server
from http1 import Pool, http_request
from loadgen import Load, bounded

SEND_BODY = {
    "message": "Backup of build-01 finished: 41.2 GB in 12 min, 0 errors.",
    "title": "relaybox bench",
    "priority": "default",
    "tags": ["bench", "backup"],
}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def phone_request(public_key: bytes, name: str) -> dict[str, str]:
    """``POST /v1/devices``: a phone, and with it a new account (201: its id and device token)."""
    return {"public_key": b64(public_key), "name": name}


def pair_init_request(public_key: bytes, name: str) -> dict[str, str]:
    """``POST /v1/pair/init``, unauthenticated: a computer asks to pair (201: the code to confirm)."""
    return {"public_key": b64(public_key), "surface_kind": "cli", "name": name}


def pair_confirm_request(code: str, phone_public_key: bytes) -> dict[str, str]:
    """``POST /v1/pair/confirm`` with the phone's bearer token: it confirms the code (200)."""
    return {"code": code, "public_key": b64(phone_public_key)}


@dataclass(frozen=True)
class Device:
    device_id: str
    token: str  # its device credential
    secret_key: bytes
    public_key: bytes
    server_public_key: bytes  # what the server seals to it with


@dataclass
class Account:
    """A phone (and with it an account), the computers paired with it, and a sender token."""

    phone: Device
    computers: list[Device] = field(default_factory=list)
    sender_token: str = ""

    @property
    def devices(self) -> int:
        return 1 + len(self.computers)


async def register_phone(api: Pool, name: str = "bench phone") -> Device:
    secret, public = generate_keypair()
    body, _, _ = await api.call("POST", "/v1/devices", None, phone_request(public, name), 201, checks.PHONE)
    server_key = base64.b64decode(body["server_public_key"])
    return Device(body["device_id"], body["device_token"], secret, public, server_key)


async def pair_computer(api: Pool, phone: Device, name: str) -> Device:
    secret, public = generate_keypair()
    request = pair_init_request(public, name)
    started, _, _ = await api.call("POST", "/v1/pair/init", None, request, 201, checks.PAIR_INIT)
    confirm = pair_confirm_request(started["code"], phone.public_key)
    confirmed, _, _ = await api.call(
        "POST", "/v1/pair/confirm", phone.token, confirm, 200, checks.PAIR_CONFIRM
    )
    if confirmed["device"].get("device_id") != started["device_id"]:
        raise BenchError(f"pair/confirm paired another device: {confirmed}")
    server_key = base64.b64decode(started["server_public_key"])
    return Device(started["device_id"], started["device_token"], secret, public, server_key)


async def pair_computers(
    api: Pool, phone: Device, count: int, limit: int, done: Callable[[], None] = lambda: None
) -> list[Device]:
    """Pair ``count`` computers with ``phone``, at most ``limit`` at once; ``done`` after each."""
    computers: list[Device | None] = [None] * count

    async def job(index: int) -> None:
        computers[index] = await pair_computer(api, phone, f"bench {index}")
        done()

    await bounded(count, limit, job)
    return [computer for computer in computers if computer is not None]


async def mint_sender_token(api: Pool, device_token: str) -> str:
    body, _, _ = await api.call("POST", "/v1/tokens", device_token, {"label": "bench"}, 201, checks.TOKEN)
    token: str = body["token"]
    return token


async def sender_account(api: Pool, computers: int, limit: int = 20) -> Account:
    """A phone with ``computers`` paired computers and a sender token; one send checks that it reaches
    every device (so the limits were raised enough for the run)."""
    account = Account(await register_phone(api))
    account.computers = await pair_computers(api, account.phone, computers, limit)
    account.sender_token = await mint_sender_token(api, account.phone.token)
    sent, _, _ = await api.call("POST", "/v1/send", account.sender_token, SEND_BODY, 200, checks.SENT)
    if not checks.sent_to(account.devices)(sent):
        raise BenchError(f"the probe send did not reach all {account.devices} devices: {sent}")
    return account


async def sender_accounts(server: Server, computers: Sequence[int]) -> list[Account]:
    """One sender account per entry of ``computers`` (how many computers it pairs)."""
    api = Pool(server.address, timeout_s=30)
    try:
        return [await sender_account(api, count) for count in computers]
    finally:
        api.close()


def send_load(label: str, servers: tuple[Server, ...], accounts: Sequence[Account], concurrency: int) -> Load:
    """``concurrency`` connections sending ``SEND_BODY``, connection i to ``servers[i % len]`` for
    ``accounts[i % len]`` (round robin); every answer must have reached all the account's devices."""
    if len({account.devices for account in accounts}) != 1:
        raise BenchError("the accounts of one load must have as many devices each")
    plan = []
    for n in range(concurrency):
        server, token = servers[n % len(servers)], accounts[n % len(accounts)].sender_token
        plan.append(
            (server, http_request("POST", "/v1/send", server.url.removeprefix("http://"), token, SEND_BODY))
        )
    return Load(label, servers, tuple(plan), checks.classifier(200, checks.sent_to(accounts[0].devices)))
