"""The computer side of pairing: ask the server for a code, then wait until the phone confirms it.

Waiting polls ``GET /v1/pair/result`` about once a second under an overall deadline; a pairing
code lives only minutes, so a bounded client poll is enough here.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import httpx

from client.api import ApiError
from client.device_api import DeviceApi
from client.relay import Relay, Relayed
from client.state import ClientError, DeviceState, Paired, Peer, PendingPairing, StateError
from core.domain.keys import InvalidPublicKey, b64encode, decode_public_key, generate_keypair

Surface = Literal["cli", "desktop"]
SURFACES: tuple[Surface, ...] = ("cli", "desktop")
DEFAULT_TIMEOUT_S = 300.0
POLL_INTERVAL_S = 1.0
NAME_MAX = 64


def default_name() -> str:
    """This machine's host name (what the phone lists the computer as)."""
    return (socket.gethostname() or "computer")[:NAME_MAX]


def start_pairing(
    path: Path,
    *,
    server: str,
    name: str,
    surface: Surface = "cli",
    force: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> DeviceState:
    """Generate a key pair, ask the server for a pairing code and save the pending state to ``path``.

    A computer that is already paired (or a file that is not a computer state) is kept unless
    ``force``; an earlier attempt that never completed is simply replaced.
    """
    if not force:
        _refuse_to_replace(path)
    secret, public = generate_keypair()
    with DeviceApi(server, transport=transport) as api:
        started = api.pair_init(public_key=b64encode(public), surface_kind=surface, name=name)
        pending = PendingPairing(code=started.code, expires_at=started.expires_at)
        state = DeviceState.enrolled(
            api.server, "computer", (secret, public), started, name=name, pending=pending
        )
    state.save(path)
    return state


def wait_for_pairing(
    path: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = POLL_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    wall_clock: Callable[[], float] = time.time,
    transport: httpx.BaseTransport | None = None,
) -> Paired:
    """Poll until the phone confirms the pending code, then store the phone as a peer and return
    the safety number. Raises ``pairing_timeout`` after ``timeout`` seconds and passes on the
    server's ``pairing_expired``; brief network or server trouble is retried until the deadline."""
    state = DeviceState.load(path, role="computer")
    if state.pending is None:
        raise StateError("not_pairing", f"{path} has no pairing in progress; run `relaybox pair` first")
    deadline = clock() + timeout
    last_trouble: ApiError | None = None
    with DeviceApi(state.server, state.device_token, transport=transport) as api:
        while True:
            try:
                result = api.pair_result()
            except ApiError as error:
                if error.code == "invalid_token" and state.pending.expires_at <= wall_clock():
                    # Once the server sweeps an expired code, its pending credential is simply unknown.
                    raise ClientError(
                        "pairing_expired", "the pairing code expired before the phone confirmed it"
                    ) from error
                if not _transient(error):
                    raise
                last_trouble = error
            else:
                if result.status == "paired":
                    return _remember_phone(
                        path,
                        state,
                        result.phone_device_id,
                        result.phone_name,
                        result.phone_public_key,
                        result.pair_id,
                    )
            remaining = deadline - clock()
            if remaining <= 0:
                detail = f" (last error: {last_trouble.code}: {last_trouble.message})" if last_trouble else ""
                raise ClientError(
                    "pairing_timeout",
                    f"the phone did not confirm code {state.pending.code} within {timeout:g} s{detail}",
                )
            sleep(min(interval, remaining))


def load(path: Path) -> DeviceState:
    """The computer state at ``path`` (``no_state``, ``invalid_state`` or ``wrong_role`` otherwise)."""
    return DeviceState.load(path, role="computer")


def relay_text(path: Path, text: str, *, transport: httpx.BaseTransport | None = None) -> Relayed:
    """Send ``text`` to the paired phone as a clipboard payload ``{"type": "clipboard", "text": …}``."""
    state = load(path)
    if state.pending is not None and not state.peers:
        raise StateError("not_paired", f"{path} is still waiting for the phone to confirm its pairing code")
    with Relay(path, state, transport=transport) as relay:
        return relay.send_text(text)


def _remember_phone(
    path: Path,
    state: DeviceState,
    phone_id: str | None,
    phone_name: str | None,
    phone_key: str | None,
    pair_id: str | None,
) -> Paired:
    if phone_id is None or phone_name is None or phone_key is None or pair_id is None:
        raise ApiError(200, "invalid_response", "a paired result lacks the phone's id, name or key")
    try:
        decode_public_key(phone_key)
    except InvalidPublicKey as exc:
        raise ApiError(200, "invalid_response", f"the server sent a malformed phone key: {exc}") from exc
    paired = state.add_peer(
        phone_id, Peer(name=phone_name, surface_kind="phone", public_key=phone_key, pair_id=pair_id)
    )
    state.pending = None
    state.save(path)
    return paired


def _transient(error: ApiError) -> bool:
    return error.status == 0 or error.status == 429 or error.status >= 500


def _refuse_to_replace(path: Path) -> None:
    if not path.exists():
        return
    try:
        existing = DeviceState.load(path, role="computer")
    except StateError as exc:
        raise StateError(
            "state_exists",
            f"{path} exists and is not a computer state ({exc.message}); pass --force to replace it",
        ) from exc
    if existing.peers:
        names = ", ".join(peer.name or peer_id for peer_id, peer in existing.peers.items())
        raise StateError(
            "state_exists",
            f"{path} is already paired with {names}; pass --force to pair again as a new computer",
        )
