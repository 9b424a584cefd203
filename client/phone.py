"""The virtual phone: it registers (creating an account), confirms pairing codes typed into it,
and manages the account's sender tokens. Its state lives in one 0600 file (``client.state``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import httpx

from client.api import ApiError
from client.device_api import CreatedToken, DeviceApi, Invite, TokenInfo
from client.dispatch import Dispatcher, default_dispatcher, one_line
from client.opener import Received
from client.phone_api import Acknowledged, Answered, PhoneApi
from client.phone_ops import PhoneOps
from client.questions import answer_question as _answer_question
from client.relay import Relay, Relayed
from client.state import DeviceState, Paired, Peer, StateError
from core.domain.keys import InvalidPublicKey, b64encode, decode_public_key, generate_keypair

DEFAULT_NAME = "relaybox virtual phone"
INVITE_HINT = (
    " To get an invite: on a phone already registered there, `relaybox phone invite`; or where the"
    " server runs, `relaybox invite`. Then: relaybox phone register --invite INVITE"
)


def register(
    path: Path,
    *,
    server: str,
    name: str = DEFAULT_NAME,
    app_build: int | None = None,
    invite: str | None = None,
    force: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> DeviceState:
    """Generate a key pair, register this phone (a new account) and save its state to ``path``;
    ``invite``: one made by a phone already on the server (``create_invite``) or its operator
    (``relaybox invite``), which a server that takes phones by invite needs.

    An existing state file is kept unless ``force``: it holds the only copy of a device's keys.
    """
    if path.exists() and not force:
        raise StateError("state_exists", f"{path} already holds a device; pass --force to replace it")
    secret, public = generate_keypair()
    with DeviceApi(server, transport=transport) as api:
        try:
            registered = api.register_phone(
                public_key=b64encode(public), name=name, app_build=app_build, invite=invite
            )
        except ApiError as error:
            if error.code in ("registration_closed", "invalid_invite"):
                raise ApiError(error.status, error.code, error.message + INVITE_HINT) from None
            raise
        state = DeviceState.enrolled(
            api.server, "phone", (secret, public), registered, name=name, account_id=registered.account_id
        )
    state.save(path)
    return state


def create_invite(path: Path, *, transport: httpx.BaseTransport | None = None) -> Invite:
    """A single-use invite for one more phone on this phone's server (24 hours)."""
    with _api(load(path), transport) as api:
        return api.create_invite()


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


def confirm_connector(path: Path, code: str, *, transport: httpx.BaseTransport | None = None) -> str:
    """Confirm the six-digit code an AI assistant's consent page shows; returns the assistant's name.

    The phone confirms it on the pairing route, asking for a connector code only, so a computer's
    pairing code typed here by mistake is left untouched. Approving happens on the page.
    """
    state = load(path)
    body = {"code": normalise_code(code), "public_key": state.public_key, "intent": "connector"}
    with _api(state, transport) as api:
        # DeviceApi.pair_confirm reads a pairing answer (a device); a connector answer names the client.
        answer = api._call("POST", "/v1/pair/confirm", body=body)
    name = answer.get("client_name") if isinstance(answer, dict) else None
    if not isinstance(name, str):
        raise ApiError(200, "invalid_response", "the server did not name the connecting client")
    return name


def create_token(
    path: Path,
    *,
    label: str,
    scope: str | None = None,
    priority_cap: str | None = None,
    token_format: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> CreatedToken:
    """Mint a sender token. Its plaintext is returned once and is not stored anywhere."""
    with _api(load(path), transport) as api:
        return api.create_token(
            label=label, scope=scope, priority_cap=priority_cap, token_format=token_format
        )


def list_tokens(path: Path, *, transport: httpx.BaseTransport | None = None) -> list[TokenInfo]:
    """The account's active sender tokens (never their plaintext)."""
    with _api(load(path), transport) as api:
        return api.list_tokens()


def revoke_token(path: Path, token_id: str, *, transport: httpx.BaseTransport | None = None) -> TokenInfo:
    """Revoke a sender token; senders using it get 401 ``invalid_token`` from then on."""
    with _api(load(path), transport) as api:
        return api.revoke_token(token_id)


def relay_text(
    path: Path, text: str, *, to: str | None = None, transport: httpx.BaseTransport | None = None
) -> Relayed:
    """Send ``text`` to a paired device as a clipboard payload (default: the only paired device)."""
    with Relay(path, load(path), transport=transport) as relay:
        return relay.send_text(text, to=to)


def answer(
    path: Path,
    interaction_id: str,
    choice_index: int | None,
    text: str | None = None,
    *,
    transport: httpx.BaseTransport | None = None,
) -> Answered:
    """Answer a question the phone was asked (``choice_index``: 0 is the first choice), with a typed
    reply ``text`` where the question allows one (alone where it has no choices). The server
    refuses a second answer (409 ``already_answered``) and a late one (``interaction_expired``)."""
    return _answer_question(load(path), interaction_id, choice_index, text, transport=transport)


def acknowledge(path: Path, receipt: str, *, transport: httpx.BaseTransport | None = None) -> Acknowledged:
    """Acknowledge an urgent notification (``receipt``, ``rcp_…``): it stops repeating on every
    device. Answers the receipt's state: ``acknowledged``, also when another device was first, or
    ``cancelled`` / ``expired`` when it was settled before."""
    state = load(path)
    with PhoneApi(state.server, state.device_token, transport=transport) as api:
        return api.acknowledge_receipt(receipt)


def run_dispatcher(path: Path, ops: PhoneOps | None = None) -> Dispatcher:
    """What ``relaybox phone run`` does with each payload and push type: one describer per type.

    This is the table to extend: add an entry to ``payloads`` (keyed by the decrypted payload's
    ``type``) or ``pushes`` (keyed by the push ``type``). A describer gets the opened ``Received``
    and returns the line to print; it may act first (the state file is at ``path``;
    ``client.relay.Relay`` answers a peer). With ``ops``, reminders, questions, ring and documents
    are handled by ``client.phone_ops`` (which prints its own output).
    """
    dispatcher = default_dispatcher()
    dispatcher.pushes.update(
        {
            "notify": _describe_notify,
            "reg_challenge": _describe_reg_challenge,
            "disconnect": _describe_disconnect(path),
            "batch_dismiss": _describe_batch_dismiss,
        }
    )
    if ops is not None:
        ops.install(dispatcher)
    return dispatcher


def _describe_notify(item: Received) -> str:
    msg_id = one_line(item.payload.get("msgId", "?"))
    seq = one_line(item.payload.get("seqId", "?"))
    return f"push notify: would fetch message {msg_id} (queued as seq {seq}; it arrives on this stream)"


def _describe_reg_challenge(item: Received) -> str:
    return f"push reg_challenge: registration id {one_line(item.payload.get('registrationId', '?'))}"


def _describe_disconnect(path: Path) -> Callable[[Received], str]:
    def describe(item: Received) -> str:
        device_id = str(item.payload.get("deviceId", "?"))
        try:
            peer = load(path).peers.get(device_id)
        except StateError:
            peer = None
        name = f" ({peer.name})" if peer is not None and peer.name else ""
        return one_line(f"push disconnect: device {device_id}{name} disconnected")

    return describe


def _describe_batch_dismiss(item: Received) -> str:
    ids = str(item.payload.get("msgIds", "")).replace(",", ", ")
    return one_line(f"push batch_dismiss: dismissed {ids or 'nothing'}")


def _api(state: DeviceState, transport: httpx.BaseTransport | None) -> DeviceApi:
    return DeviceApi(state.server, state.device_token, transport=transport)
