"""Relaying to a paired device: seal a payload to its key and post it (``POST /v1/envelopes``)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from client.api import ApiError, RelayboxApi, without_none
from client.lifecycle import Closing
from client.state import ClientError, DeviceState, Peer
from core.domain.canonical import canonical_json
from core.domain.envelope import PairBox


@dataclass(frozen=True, slots=True)
class Relayed:
    peer_id: str
    peer: Peer
    seq: int
    msg_id: str


class Relay(Closing):
    """Seals payloads to paired devices and posts them over one connection. A context manager."""

    def __init__(
        self, path: Path, state: DeviceState, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.path = path
        self.state = state
        self._api = _RelayApi(state.server, state.device_token, transport=transport)
        self._boxes: dict[str, PairBox] = {}

    def close(self) -> None:
        self._api.close()

    def send(self, payload: dict[str, Any], *, to: str | None = None, ttl: int | None = None) -> Relayed:
        """Seal ``payload`` (a JSON object with ``type``) to the peer ``to`` and post it."""
        peer_id, peer = resolve_peer(self.state, to)
        box = self._boxes.get(peer_id)
        if box is None:
            box = self._boxes[peer_id] = PairBox(self.state.secret_key_bytes, peer.public_key_bytes)
        blob = box.seal(canonical_json(payload))
        seq, msg_id = self._api.post_envelope(to=peer_id, type=str(payload["type"]), blob=blob, ttl=ttl)
        return Relayed(peer_id, peer, seq, msg_id)

    def send_text(self, text: str, *, to: str | None = None) -> Relayed:
        """Relay ``text`` as a clipboard payload: ``{"type": "clipboard", "text": text}``."""
        return self.send({"type": "clipboard", "text": text}, to=to)


class _RelayApi(RelayboxApi):
    def post_envelope(self, *, to: str, type: str, blob: bytes, ttl: int | None) -> tuple[int, str]:
        body = {"to": to, "type": type, "blob": base64.b64encode(blob).decode(), **without_none(ttl=ttl)}
        raw = self._call("POST", "/v1/envelopes", body=body, expect=202)
        seq = raw.get("seq") if isinstance(raw, dict) else None
        msg_id = raw.get("msg_id") if isinstance(raw, dict) else None
        if not isinstance(seq, int) or not isinstance(msg_id, str):
            raise ApiError(202, "invalid_response", "the relay answer lacks seq or msg_id")
        return seq, msg_id


def resolve_peer(state: DeviceState, to: str | None) -> tuple[str, Peer]:
    """The paired device named by id or name; with ``to`` None, the only one."""
    peers = state.peers
    if not peers:
        raise ClientError("not_paired", "this device is not paired with any device yet")
    listing = ", ".join(f"{peer.name or '(unnamed)'} [{peer_id}]" for peer_id, peer in peers.items())
    if to is None:
        if len(peers) > 1:
            raise ClientError("peer_required", f"several paired devices ({listing}); choose one with --to")
        return next(iter(peers.items()))
    if to in peers:
        return to, peers[to]
    matches = [(i, p) for i, p in peers.items() if p.name == to] or [
        (i, p) for i, p in peers.items() if p.name.casefold() == to.casefold()
    ]
    if len(matches) > 1:
        raise ClientError(
            "ambiguous_peer", f"several paired devices are called {to!r}; use the id ({listing})"
        )
    if not matches:
        raise ClientError("unknown_peer", f"no paired device {to!r} (paired: {listing})")
    return matches[0]
