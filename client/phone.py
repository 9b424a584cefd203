"""The virtual phone: it registers (creating an account), confirms pairing codes typed into it,
and manages the account's sender tokens. Its state lives in one 0600 file (``client.state``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx

from client.api import CreatedToken, RelayboxApi, TokenInfo
from client.state import DeviceState, Paired, Peer, StateError
from core.domain.keys import InvalidPublicKey, b64encode, decode_public_key, generate_keypair

DEFAULT_NAME = "relaybox virtual phone"


def register(
    path: Path,
    *,
    server: str,
    name: str = DEFAULT_NAME,
    app_build: int | None = None,
    force: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> DeviceState:
    """Generate a key pair, register this phone (a new account) and save its state to ``path``.

    An existing state file is kept unless ``force``: it holds the only copy of a device's keys.
    """
    if path.exists() and not force:
        raise StateError("state_exists", f"{path} already holds a device; pass --force to replace it")
    secret, public = generate_keypair()
    with RelayboxApi(server, transport=transport) as api:
        registered = api.register_phone(public_key=b64encode(public), name=name, app_build=app_build)
        state = DeviceState(
            server=api.server,
            role="phone",
            device_id=registered.device_id,
            device_token=registered.device_token,
            secret_key=b64encode(secret),
            public_key=b64encode(public),
            server_public_key=registered.server_public_key,
            name=name,
            account_id=registered.account_id,
        )
    state.save(path)
    return state


def load(path: Path) -> DeviceState:
    """The phone state at ``path`` (``no_state``, ``invalid_state`` or ``wrong_role`` otherwise)."""
    return DeviceState.load(path, role="phone")


def normalise_code(code: str) -> str:
    """Accept a code typed as ``123 456`` or ``123-456``; the server checks the rest."""
    return "".join(ch for ch in code.strip() if ch not in " -")


def confirm_pairing(path: Path, code: str, *, transport: httpx.BaseTransport | None = None) -> Paired:
    """Confirm a pairing code shown by a computer, remember the computer as a peer, and return the
    safety number of the two public keys (which the computer shows too)."""
    state = load(path)
    with _api(state, transport) as api:
        confirmed = api.pair_confirm(code=normalise_code(code), public_key=state.public_key)
    try:
        decode_public_key(confirmed.public_key)
    except InvalidPublicKey as exc:
        raise StateError("invalid_response", f"the server sent a malformed device key: {exc}") from exc
    peer = Peer(
        name=confirmed.name,
        surface_kind=confirmed.surface_kind,
        public_key=confirmed.public_key,
        pair_id=confirmed.pair_id,
    )
    paired = state.add_peer(confirmed.device_id, peer)
    state.save(path)
    return dataclasses.replace(paired, intent=confirmed.intent)


def create_token(
    path: Path,
    *,
    label: str,
    scope: str | None = None,
    priority_cap: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> CreatedToken:
    """Mint a sender token. Its plaintext is returned once and is not stored anywhere."""
    with _api(load(path), transport) as api:
        return api.create_token(label=label, scope=scope, priority_cap=priority_cap)


def list_tokens(path: Path, *, transport: httpx.BaseTransport | None = None) -> list[TokenInfo]:
    """The account's active sender tokens (never their plaintext)."""
    with _api(load(path), transport) as api:
        return api.list_tokens()


def revoke_token(path: Path, token_id: str, *, transport: httpx.BaseTransport | None = None) -> TokenInfo:
    """Revoke a sender token; senders using it get 401 ``invalid_token`` from then on."""
    with _api(load(path), transport) as api:
        return api.revoke_token(token_id)


def _api(state: DeviceState, transport: httpx.BaseTransport | None) -> RelayboxApi:
    return RelayboxApi(state.server, state.device_token, transport=transport)
