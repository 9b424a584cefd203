"""The wake-up a queue entry sends to its recipient's open streams, over the fan-out.

It names the entry's ``seq`` and the ``prev`` seq of the recipient's entry before it (0: none),
and carries a small entry itself (sender, type, blob as the stream shows it). A stream that has
delivered exactly ``prev`` writes the carried entry without reading the store; any other stream
(behind, after a lost wake-up, or an entry too big to carry) reads the store as before. Entries of
one recipient are committed in seq order (``queue.enqueue_all``), so ``prev`` is exact: the newest
entry before this one (on SQLite the newest seq the recipient was handed, which its count keeps,
even when that entry has since gone: a stream that did not deliver it reads the store).
"""

from __future__ import annotations

import base64
from binascii import b2a_base64
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_text  # a str as json.dumps writes it

CARRIED_MAX_CHARS = 4096  # a larger blob is read from the store: wake-ups stay small


def blob_text(type: str, blob: bytes) -> str:
    """A queued blob as a stream shows it: a push message is JSON text, an envelope base64."""
    return blob.decode() if type == "push" else base64.b64encode(blob).decode()


class WakeUps:
    """The wake-ups of entries from one sender, of one type (a send's, one to each device): what
    they share is encoded once. ``message`` is ``json.dumps`` of ``{"seq", "prev", "entry"}``
    (compact separators), the entry left out when its blob is too big to carry."""

    __slots__ = ("_blob_json", "_entry_head")

    def __init__(self, sender: str, type: str) -> None:
        self._entry_head = f',"entry":{{"from":{_json_text(sender)},"type":{_json_text(type)},"blob":'
        self._blob_json = _push_json if type == "push" else _envelope_json

    def message(self, seq: int, prev: int, blob: bytes) -> str:
        if len(blob) * 4 // 3 + 4 > CARRIED_MAX_CHARS:
            return f'{{"seq":{seq},"prev":{prev}}}'
        return f'{{"seq":{seq},"prev":{prev}{self._entry_head}{self._blob_json(blob)}}}}}'


def _push_json(blob: bytes) -> str:
    """A push message's blob (JSON text, ``blob_text``) as a JSON string."""
    return _json_text(blob.decode())


def _envelope_json(blob: bytes) -> str:
    """An envelope's blob as a JSON string: its base64 (``blob_text``), which needs no escaping. A
    send writes one to each device: ``b2a_base64`` itself, not ``b64encode`` and an escaping pass."""
    return f'"{b2a_base64(blob, newline=False).decode()}"'


@dataclass(frozen=True, slots=True)
class Carried:
    """An entry carried by its wake-up."""

    seq: int
    prev: int
    sender: str
    type: str
    blob: str


def carried(message: dict[str, object]) -> Carried | None:
    """The entry a parsed wake-up carries, if it carries one well formed."""
    seq, prev, entry = message.get("seq"), message.get("prev"), message.get("entry")
    if not (isinstance(seq, int) and isinstance(prev, int) and isinstance(entry, dict)):
        return None
    sender, type, blob = entry.get("from"), entry.get("type"), entry.get("blob")
    if not (isinstance(sender, str) and isinstance(type, str) and isinstance(blob, str)):
        return None
    return Carried(seq, prev, sender, type, blob)
