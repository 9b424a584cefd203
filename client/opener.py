"""Opening what arrives on the stream: ``Opener`` turns a ``SyncEvent`` into ``Received`` (sender
and decrypted payload) or ``Dropped`` (a one-line reason); it never raises for what a server or
peer sent."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from client.state import DeviceState, StateError
from client.sync_follower import SyncEvent
from core.domain.envelope import EnvelopeError, PairBox
from core.domain.keys import InvalidPublicKey, decode_public_key

SERVER: Final = "server"


@dataclass(frozen=True, slots=True)
class Received:
    """An event that was opened. For ``envelope`` and ``token_update``, ``payload`` is the
    decrypted JSON object; for ``push`` it is the cleartext fields after ``type`` and ``inline``
    is the decrypted inline ``payload`` envelope, if the push carried one. ``live``: a push that was
    never queued (see ``SyncEvent``); its JSON form has ``"seq": null`` and ``"live": true``."""

    seq: int
    event: str
    sender: str
    sender_name: str
    type: str
    payload: dict[str, Any]
    inline: dict[str, Any] | None = None
    live: bool = False

    def sequence(self) -> str:
        """The sequence of the notification (or clear) this carries, as this device keys it: its
        ``sequence_id``, else its ``id``. The server qualifies its own by their sender
        (``tok_…:deploy-42``, docs/protocol.md "Sequences"); one a paired device sealed itself is
        qualified here by that device's id, so that it can name neither a sender's sequence nor
        another device's."""
        fields = self.payload if self.event != "push" else (self.inline or {})
        sequence = str(fields.get("sequence_id") or fields.get("id") or "")
        return sequence if self.sender == SERVER or not sequence else f"{self.sender}:{sequence}"

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "seq": None if self.live else self.seq,
            "event": self.event,
            "from": self.sender,
            "type": self.type,
            "payload": self.payload,
        }
        if self.inline is not None:
            record["inline"] = self.inline
        if self.live:
            record["live"] = True
        return record


@dataclass(frozen=True, slots=True)
class Dropped:
    """An event that could not be opened or read; the message is dropped with this reason."""

    seq: int
    event: str
    sender: str
    reason: str


class _Drop(Exception):  # noqa: N818 - internal signal carrying the reason
    pass


class Opener:
    """Opens stream events for the device whose state is at ``path``. A sender it does not know is
    looked up again in the state file once (a device paired while this process runs)."""

    def __init__(self, path: Path, state: DeviceState) -> None:
        self._path = path
        self._state = state
        self._boxes: dict[str, PairBox] = {}

    @property
    def state(self) -> DeviceState:
        return self._state

    def open(self, event: SyncEvent) -> Received | Dropped:
        sender = SERVER
        try:
            data = _json_object(event.data.encode(), "the event data")
            if event.event == "push":
                return self._push(event, data)
            if event.event not in ("envelope", "token_update"):
                raise _Drop(f"unknown event kind {event.event!r}")
            sender = _field(data, "from")
            label = _field(data, "type")
            payload = self._open_blob(sender, _field(data, "blob"))
            if payload["type"] != label or (event.event == "token_update") != (label == "token_update"):
                raise _Drop(f"labelled {label!r} but the payload is {payload['type']!r}")
            return Received(event.seq, event.event, sender, self.name_of(sender), label, payload)
        except _Drop as drop:
            return Dropped(event.seq, event.event, sender, str(drop))

    def name_of(self, sender: str) -> str:
        if sender == SERVER:
            return SERVER
        peer = self._state.peers.get(sender)
        return (peer.name if peer is not None else "") or sender

    def _push(self, event: SyncEvent, data: dict[str, Any]) -> Received:
        push_type = _field(data, "type")
        fields = {key: value for key, value in data.items() if key not in ("seq", "type")}
        inline = None
        if "payload" in fields:
            inline = self._open_blob(SERVER, _field(data, "payload"))
        return Received(event.seq, "push", SERVER, SERVER, push_type, fields, inline, live=event.live)

    def _open_blob(self, sender: str, blob_text: str) -> dict[str, Any]:
        try:
            blob = base64.b64decode(blob_text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _Drop("the envelope is not base64") from exc
        try:
            plaintext = self._box(sender).open(blob)
        except EnvelopeError as exc:
            raise _Drop(f"cannot open the envelope ({type(exc).__name__}: {exc})") from exc
        payload = _json_object(plaintext, "the payload")
        if not isinstance(payload.get("type"), str) or not payload["type"]:
            raise _Drop("the payload has no type")
        return payload

    def _box(self, sender: str) -> PairBox:
        box = self._boxes.get(sender)
        if box is None:
            key = self._public_key(sender)
            try:
                box = PairBox(self._state.secret_key_bytes, key)
            except InvalidPublicKey as exc:
                raise _Drop(f"unusable key for {sender}: {exc}") from exc
            self._boxes[sender] = box
        return box

    def _public_key(self, sender: str) -> bytes:
        if sender == SERVER:
            return decode_public_key(self._state.server_public_key)
        if sender not in self._state.peers:
            self._reload()
        peer = self._state.peers.get(sender)
        if peer is None:
            raise _Drop(f"{sender} is not a paired device")
        return peer.public_key_bytes

    def _reload(self) -> None:
        try:
            fresh = DeviceState.load(self._path, role=self._state.role)
        except StateError:
            return
        if fresh.device_id == self._state.device_id:
            self._state = fresh


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value: object = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Drop(f"{what} is not UTF-8 JSON") from exc
    if not isinstance(value, dict):
        raise _Drop(f"{what} is not a JSON object")
    return cast(dict[str, Any], value)


def _field(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _Drop(f"the event has no {key!r}")
    return value
