"""Hypothesis properties of the parsers and the wire code: each either succeeds with a result inside
its documented limits or raises only its documented error, whatever the input.

``RELAYBOX_FUZZ_EXAMPLES`` sets the examples per property (see tests/fuzz/__init__.py).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
import hypothesis
import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import strategies as st
from hypothesis.vendor import pretty
from starlette.requests import Request
from starlette.testclient import TestClient
from starlette.types import Message

from core.api.forms import read_fields
from core.api.phone import wait_seconds
from core.api.relay import MAX_SEQ, replay_point
from core.domain import payloads
from core.domain.canonical import canonical_json
from core.domain.chunks import ChunkCipher, ChunkError
from core.domain.envelope import (
    MIN_LENGTH,
    EnvelopeError,
    EnvelopeOpenFailed,
    EnvelopeTooShort,
    PairBox,
    UnsupportedWireVersion,
    open_envelope,
    seal,
)
from core.domain.filenames import (
    ALLOWED_EXTENSIONS,
    SANITIZED_MAX_CHARS,
    UnsafeFilenameError,
    sanitize_filename,
)
from core.domain.keys import InvalidPublicKey, b64encode, decode_public_key, generate_keypair
from core.domain.notification import (
    ACTION_LABEL_MAX_BYTES,
    DEVICE_SELECTOR_MAX,
    MAX_ACTIONS,
    MAX_TAGS,
    MESSAGE_MAX_BYTES,
    PRIORITIES,
    TAG_MAX_CHARS,
    TITLE_MAX_BYTES,
    TTL_MAX_S,
    URL_MAX_BYTES,
    URL_TITLE_MAX_BYTES,
    InvalidFieldError,
    Notification,
    parse_device_selector,
    parse_notification,
)
from core.errors import RelayError
from core.settings import Settings, explicit_settings
from tests.fuzz import fuzz_examples
from tests.helpers import FakeDevice, create_token, pair_computer, register_phone


@pytest.fixture(autouse=True)
def falsifying_examples_are_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing schemathesis (its pytest plugin does) swaps Hypothesis's example printer for one that
    prints nothing, for speed; these properties need their falsifying examples shown."""
    monkeypatch.setattr(hypothesis.core, "RepresentationPrinter", pretty.RepresentationPrinter)


PURE = hypothesis.settings(max_examples=fuzz_examples(200), deadline=None, database=None, print_blob=True)
HTTP = hypothesis.settings(
    max_examples=fuzz_examples(50),
    deadline=None,
    database=None,
    print_blob=True,
    # One app serves every example of a test: each example is a request, independent of the others.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text as JSON can carry it: any code point, and often enough a lone surrogate (JSON can escape one,
# UTF-8 cannot encode it) or a character that parsers split, strip or refuse on.
SPECIALS = "\ud800\udfff/\\.,:; \t\n\x00\x1f\x85\u200b\u202e\ufeff"
characters = st.one_of(st.characters(), st.sampled_from(SPECIALS))


def strings(alphabet: st.SearchStrategy[str], *, min_size: int = 0, max_size: int) -> st.SearchStrategy[str]:
    """Text drawn one character at a time: ``st.text`` would merge the alphabet into one set of code
    points and draw the specials almost never."""
    return st.lists(alphabet, min_size=min_size, max_size=max_size).map("".join)


texts = strings(characters, max_size=40)
words = strings(characters, min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))  # raises on a lone surrogate: parsed text never holds one


def any_case(words: list[str]) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(words), st.randoms()).map(
        lambda pair: "".join(c.upper() if pair[1].random() < 0.5 else c for c in pair[0])
    )


def mostly(strategy: st.SearchStrategy[Any], otherwise: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` three times in four, else ``otherwise`` (each mapped, so that ``one_of`` does not
    flatten their own branches into its choice)."""

    def same(value: Any) -> Any:
        return value

    return st.one_of(strategy.map(same), strategy.map(same), strategy.map(same), otherwise.map(same))


# ---------------------------------------------------------------- envelopes and the other wire code

SENDER_SECRET, SENDER_PUBLIC = generate_keypair()
RECIPIENT_SECRET, RECIPIENT_PUBLIC = generate_keypair()
OPENER = PairBox(RECIPIENT_SECRET, SENDER_PUBLIC)
versioned = st.binary(min_size=MIN_LENGTH - 1, max_size=300).map(lambda body: b"\x01" + body)


@PURE
@given(blob=st.one_of(st.binary(max_size=300), versioned))
@example(blob=b"")
@example(blob=b"\x01" * (MIN_LENGTH - 1))
@example(blob=b"\x01" + b"\x00" * MIN_LENGTH)
def test_opening_arbitrary_bytes_raises_only_envelope_errors(blob: bytes) -> None:
    # (A forgery that authenticates is out of reach of random bytes: every blob here fails to open.)
    with pytest.raises(EnvelopeError):
        OPENER.open(blob)
    with pytest.raises(EnvelopeError):
        open_envelope(blob, RECIPIENT_SECRET, SENDER_PUBLIC)


@PURE
@given(blob=st.one_of(st.text(max_size=50), st.integers(), st.none(), st.lists(st.integers(0, 255))))
def test_opening_what_is_not_bytes_raises_only_envelope_errors(blob: Any) -> None:
    with pytest.raises(EnvelopeError):
        OPENER.open(blob)


@PURE
@given(
    plaintext=st.binary(max_size=300),
    position=st.integers(min_value=0),
    flip=st.integers(min_value=1, max_value=255),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_any_flipped_byte_of_an_envelope_is_refused(
    plaintext: bytes, position: int, flip: int, kind: Callable[[bytes], Any]
) -> None:
    blob = seal(plaintext, SENDER_SECRET, RECIPIENT_PUBLIC)
    assert OPENER.open(kind(blob)) == plaintext
    index = position % len(blob)
    tampered = bytearray(blob)
    tampered[index] ^= flip
    expected = UnsupportedWireVersion if index == 0 else EnvelopeOpenFailed
    with pytest.raises(expected):
        OPENER.open(kind(bytes(tampered)))
    with pytest.raises(EnvelopeTooShort if index < MIN_LENGTH else EnvelopeOpenFailed):
        OPENER.open(blob[:index])


@PURE
@given(ciphertext=st.binary(max_size=200), index=st.integers(0, 2**64 - 1), is_final=st.booleans())
def test_opening_an_arbitrary_chunk_raises_only_chunk_errors(
    ciphertext: bytes, index: int, is_final: bool
) -> None:
    cipher = ChunkCipher(b"k" * 32, b"n" * 16, "transfer", "file")
    with pytest.raises(ChunkError):
        cipher.open(index, ciphertext, is_final=is_final)


@PURE
@given(
    text=st.one_of(
        texts,
        st.binary(min_size=30, max_size=34).map(b64encode),
        st.from_regex(r"[A-Za-z0-9+/]{43}=", fullmatch=True),
    )
)
def test_public_keys_decode_canonically_or_raise_invalid_public_key(text: str) -> None:
    try:
        raw = decode_public_key(text)
    except InvalidPublicKey:
        return
    assert len(raw) == 32
    assert b64encode(raw) == text


# --------------------------------------------------------------------------------- canonical JSON

finite_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@PURE
@given(value=finite_json)
def test_canonical_json_round_trips(value: Any) -> None:
    encoded = canonical_json(value)
    decoded = json.loads(encoded.decode("utf-8"))
    assert decoded == value
    assert canonical_json(decoded) == encoded


@PURE
@given(value=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_canonical_json_refuses_what_json_cannot_say(value: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json({"ttl": value})


# ----------------------------------------------------------------------------- send fields

FIELDS = (
    "message",
    "title",
    "priority",
    "tags",
    "url",
    "url_title",
    "actions",
    "markdown",
    "ttl",
    "device",
    "sequence_id",
    "icon",
)
no_space = st.one_of(
    st.characters(exclude_categories=["Zs", "Zl", "Zp", "Cc"]), st.sampled_from("\ud800/?#%")
)
urls = st.builds(
    "{}://{}{}".format,
    st.sampled_from(["http", "https", "HTTPS", "http", "https", "ftp", "javascript", ""]),
    st.sampled_from(["example.com", "example.com", "x:1", "[::1]", ""]),
    strings(no_space, max_size=40),
)
selectors = st.one_of(
    any_case(["all", "phone", "mobile", "desktop", "Pixel", "laptop"]),
    texts,
    st.lists(st.one_of(texts, any_case(["all", "phone", "desktop"])), max_size=25).map(",".join),
    st.lists(st.one_of(texts, any_case(["phone", "laptop"])), max_size=25),
    json_values,
)
# Each field mostly well-formed (so that parsing reaches the fields after it), or anything at all.
near_valid: dict[str, st.SearchStrategy[Any]] = {
    "message": st.text(min_size=1, max_size=1600),
    "title": st.text(min_size=1, max_size=120),
    "priority": any_case(list(PRIORITIES)),
    "tags": st.lists(words, max_size=8) | st.lists(words, max_size=8).map(",".join),
    "url": urls,
    "url_title": st.text(min_size=1, max_size=120),
    "actions": st.lists(
        st.fixed_dictionaries(
            {"label": mostly(words, texts), "url": urls},
            optional={
                "action": st.sampled_from(["view", "http", "HTTP", "broadcast"]),
                "method": any_case(["POST", "PUT", "GET", "DELETE"]),
                "body": st.text(max_size=600),
            },
        ),
        max_size=MAX_ACTIONS + 1,
    ),
    "sequence_id": st.one_of(st.from_regex(r"\A[A-Za-z0-9._~-]{1,64}\Z"), st.text(max_size=70)),
    "icon": urls,
    "markdown": st.sampled_from(["true", "FALSE", "1", "0", "yes", "off", 0, 1, True, False, 2]),
    "ttl": st.one_of(st.integers(), st.floats(), st.integers().map(str), st.floats().map(str)),
    "device": selectors,
}


send_fields = st.fixed_dictionaries(
    {"message": mostly(near_valid["message"], st.none() | json_values)},
    optional={
        name: mostly(strategy, json_values) for name, strategy in near_valid.items() if name != "message"
    },
).flatmap(lambda known: st.dictionaries(texts, json_values, max_size=3).map(lambda extra: {**extra, **known}))


def assert_within_limits(note: Notification) -> None:
    assert 1 <= utf8_size(note.message) <= MESSAGE_MAX_BYTES
    assert note.title is None or 1 <= utf8_size(note.title) <= TITLE_MAX_BYTES
    assert note.priority in PRIORITIES
    assert len(note.tags) <= MAX_TAGS
    assert all(1 <= len(tag) <= TAG_MAX_CHARS and tag == tag.strip() and utf8_size(tag) for tag in note.tags)
    for url in [note.url, *(action.url for action in note.actions)]:
        assert url is None or utf8_size(url) <= URL_MAX_BYTES
        assert url is None or urlsplit(url).scheme.lower() in ("http", "https")
    assert note.icon is None or (
        utf8_size(note.icon) <= URL_MAX_BYTES and note.icon.lower().startswith("https:")
    )
    assert note.sequence_id is None or re.fullmatch(r"[A-Za-z0-9._~-]{1,64}", note.sequence_id)
    for action in note.actions:
        assert action.kind in ("view", "http")
        assert (action.method is None) == (action.kind == "view")
        assert action.body is None or (action.method != "GET" and 1 <= utf8_size(action.body) <= 512)
    assert note.url_title is None or 1 <= utf8_size(note.url_title) <= URL_TITLE_MAX_BYTES
    assert len(note.actions) <= MAX_ACTIONS
    assert all(1 <= utf8_size(action.label) <= ACTION_LABEL_MAX_BYTES for action in note.actions)
    assert isinstance(note.markdown, bool)
    assert isinstance(note.ttl, int) and 0 <= note.ttl <= TTL_MAX_S
    assert_selectors(note.devices)
    # What passes is what the phone gets: it serializes to the payload's canonical JSON.
    payloads.encode(payloads.notification(note, msg_id="msg_0", sent_at=0, sender="tok_0"))


def assert_selectors(devices: tuple[str, ...]) -> None:
    assert 1 <= len(devices) <= DEVICE_SELECTOR_MAX
    assert len(set(devices)) == len(devices)
    assert all(1 <= len(s) <= 64 and s == s.strip() for s in devices)


@PURE
@given(fields=send_fields)
@example(fields={"message": "hi", "tags": ["\ud800"]})
@example(fields={"message": "hi", "url": "http://x/\ud800"})
@example(fields={"message": "hi", "actions": [{"label": "\ud800", "url": "http://x"}]})
@example(fields={"message": "hi", "actions": [{"label": "ok", "url": "https://x/\udfff"}]})
def test_send_fields_parse_within_their_limits_or_raise_invalid_field(fields: dict[str, Any]) -> None:
    try:
        note = parse_notification(fields)
    except InvalidFieldError as error:
        code = error.code
    else:
        assert_within_limits(note)
        return
    assert code.startswith("invalid_") or code == "message_too_long"


@PURE
@given(value=selectors)
def test_device_selectors_parse_or_raise_invalid_device(value: Any) -> None:
    try:
        devices = parse_device_selector(value)
    except InvalidFieldError as error:
        code = error.code
    else:
        assert_selectors(devices)
        return
    assert code == "invalid_device"


# ------------------------------------------------------------------- query and header numbers

numerals = st.one_of(
    st.integers().map(str),
    st.integers(2**63 - 3, 2**64).map(str),
    strings(st.sampled_from("0123456789-+ .\u00b2\u0661\uff11e_"), max_size=22),
    texts,
)


@PURE
@given(since_id=st.none() | numerals, last_event_id=st.none() | numerals)
def test_replay_points_parse_into_the_seq_range_or_raise_invalid_since_id(
    since_id: str | None, last_event_id: str | None
) -> None:
    try:
        after = replay_point(since_id, last_event_id)
    except RelayError as error:
        code = error.code
    else:
        assert 0 <= after <= MAX_SEQ
        return
    assert code == "invalid_since_id"


@PURE
@given(raw=st.none() | numerals)
def test_waits_parse_as_whole_seconds_or_raise_invalid_wait(raw: str | None) -> None:
    try:
        seconds = wait_seconds(raw)
    except RelayError as error:
        code = error.code
    else:
        assert isinstance(seconds, int)
        return
    assert code == "invalid_wait"


# ----------------------------------------------------------------------------------- filenames


# Names shaped as attacks are: junk in front (dots, spaces, separators, invisible characters), a stem,
# an extension (allowed, refused, odd).
filename_junk = st.sampled_from([".", "..", " ", "/", "\\", "\t", "\x00", "\u200b", "\u3000", "\ufeff"])
filenames = st.builds(
    "{}{}{}".format,
    st.lists(filename_junk, max_size=8).map("".join),
    st.one_of(st.sampled_from(["notes", "a", ". .b", "é"]), texts),
    st.one_of(st.sampled_from([".txt", ".MD", ".html", ".txt.", ".tar.gz", "", ". txt"]), texts),
)


@PURE
@given(raw=st.one_of(strings(characters, max_size=200), filenames))
@example(raw=". ..a.txt")
@example(raw=" .\u200b.notes.md")
@example(raw="../../etc/passwd.txt")
def test_filenames_are_made_safe_or_refused(raw: str) -> None:
    try:
        name = sanitize_filename(raw)
    except UnsafeFilenameError:
        return
    assert not any(ch in "/\\" or unicodedata.category(ch)[0] == "C" for ch in name)
    assert not name.startswith(".")
    assert name == name.strip()
    assert 0 < len(name) <= SANITIZED_MAX_CHARS
    stem, _, extension = name.rpartition(".")
    assert stem
    assert f".{extension.lower()}" in ALLOWED_EXTENSIONS
    assert sanitize_filename(name) == name


@PURE
@given(raw=st.one_of(st.none(), st.integers(), st.binary(), st.text(min_size=4097, max_size=4200)))
def test_filenames_that_are_not_short_text_are_refused(raw: Any) -> None:
    with pytest.raises(UnsafeFilenameError):
        sanitize_filename(raw)


# ------------------------------------------------------------------------- send body readers

LIMIT = 4096
BODY_CODES = {"invalid_json", "invalid_body", "unsupported_content_type", "body_too_large"}
any_type = st.one_of(
    st.sampled_from([None, "", "application/xml", "text/html", "multipart/mixed", "application/json-seq"]),
    st.text(max_size=40),
)
json_types = st.sampled_from(["application/json", "APPLICATION/JSON; charset=utf-8", "application/json;q"])
form_types = st.sampled_from(["application/x-www-form-urlencoded", "Application/X-WWW-Form-Urlencoded; a=b"])
multipart_types = st.sampled_from(
    [
        "multipart/form-data; boundary=B",
        'multipart/form-data; boundary="B"',
        "multipart/form-data",
        "multipart/form-data; boundary=",
        "multipart/form-data; boundary=Z",
    ]
)
text_types = st.sampled_from([None, "", "text/plain", "Text/Plain; charset=latin-1"])


def multipart_body(parts: list[tuple[str, str | None, str]]) -> bytes:
    lines = []
    for name, filename, value in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        lines += ["--B", f"Content-Disposition: {disposition}", "", value]
    return "\r\n".join([*lines, "--B--", ""]).encode("utf-8", "surrogatepass")


raw_bodies = st.one_of(st.binary(max_size=600), st.binary(min_size=LIMIT - 2, max_size=LIMIT + 2))
json_bodies = st.one_of(
    json_values.map(lambda value: json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.integers(1, LIMIT).map(lambda depth: b"[" * depth),  # nesting the decoder gives up on
    st.integers(1, 3000).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth),
    raw_bodies,
)
form_bodies = st.one_of(
    st.lists(st.tuples(texts, texts), max_size=70).map(
        lambda pairs: urlencode(pairs, encoding="utf-8", errors="surrogatepass").encode()
    ),
    raw_bodies,
)
multipart_bodies = st.one_of(
    st.lists(st.tuples(texts, st.none() | texts, texts), max_size=5).map(multipart_body), raw_bodies
)
text_bodies = st.one_of(texts.map(lambda text: text.encode("utf-8", "surrogatepass")), raw_bodies)
# A body and its Content-Type: matching (so that each reader gets its own kind of input) or not.
send_requests = st.one_of(
    st.tuples(json_bodies, json_types),
    st.tuples(form_bodies, form_types),
    st.tuples(multipart_bodies, multipart_types),
    st.tuples(text_bodies, text_types),
    st.tuples(
        st.one_of(json_bodies, form_bodies, multipart_bodies), st.one_of(any_type, text_types, json_types)
    ),
)


def read(
    body: bytes, content_type: str | None, content_length: str | None, multipart: bool
) -> dict[str, Any]:
    headers = []
    if content_type is not None:
        headers.append((b"content-type", content_type.encode("utf-8", "surrogatepass")))
    if content_length is not None:
        headers.append((b"content-length", content_length.encode()))
    chunks = [body[: len(body) // 2], body[len(body) // 2 :]]

    async def receive() -> Message:
        chunk = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    scope = {"type": "http", "method": "POST", "path": "/v1/send", "headers": headers, "query_string": b""}

    async def run() -> dict[str, Any]:
        return await read_fields(Request(scope, receive), LIMIT, multipart=multipart)

    return anyio.run(run)


@PURE
@given(
    request=send_requests,
    content_length=st.none() | st.sampled_from(["", "abc", "-1", "5", str(LIMIT + 1)]),
    multipart=st.booleans(),
)
@example(request=(b"[" * LIMIT, "application/json"), content_length=None, multipart=False)
def test_send_bodies_read_as_fields_or_raise_a_body_error(
    request: tuple[bytes, str | None], content_length: str | None, multipart: bool
) -> None:
    body, content_type = request
    try:
        fields = read(body, content_type, content_length, multipart)
    except RelayError as error:
        code = error.code
    else:
        assert_fields(fields, body, content_type)
        return
    assert code in BODY_CODES


def assert_fields(fields: dict[str, Any], body: bytes, content_type: str | None) -> None:
    assert isinstance(fields, dict)
    media = (content_type or "").split(";")[0].strip().lower()
    if media in ("", "text/plain"):
        assert fields == ({"message": body.decode("utf-8")} if body else {})
    elif media != "application/json":
        assert all(isinstance(key, str) and isinstance(value, str) for key, value in fields.items())


# ------------------------------------------------------------------ the send API, end to end


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: these properties are about parsing; the backends have suites of their own."""
    return f"sqlite:///{tmp_path / 'relaybox.db'}"


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    unlimited = 10**9
    return explicit_settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        limit_token_burst=unlimited,
        limit_token_monthly=unlimited,
        limit_receiver_daily=unlimited,
        limit_ip_minute=unlimited,
        limit_ip_hour=unlimited,
    )


class Sender:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.phone: FakeDevice = register_phone(client, name="Pixel")
        self.laptop: FakeDevice = pair_computer(client, self.phone, name="laptop")
        self.token = str(create_token(client, self.phone)["token"])
        document = client.get("/openapi.json").json()
        self.responses: dict[str, Any] = document["paths"]["/v1/send"]["post"]["responses"]

    def send(self, content: bytes, headers: dict[str, str]) -> Any:
        response = self.client.post(
            "/v1/send", content=content, headers={"Authorization": f"Bearer {self.token}", **headers}
        )
        documented = self.responses.get(str(response.status_code))
        assert documented is not None, (response.status_code, response.text)
        if response.status_code >= 400:
            code = response.json()["error"]["code"]
            assert code in documented["description"].removeprefix("Error codes: ").split(", ")
        return response


@pytest.fixture
def sender(client: TestClient) -> Sender:
    return Sender(client)


@HTTP
@given(request=send_requests)
def test_the_send_api_answers_any_body_as_documented(
    sender: Sender, request: tuple[bytes, str | None]
) -> None:
    body, content_type = request
    headers = {} if content_type is None else {"Content-Type": content_type}
    try:
        sender.send(body, headers)
    except UnicodeEncodeError:
        hypothesis.reject()  # a header value HTTP cannot carry never reaches the server


def expected_targets(sender: Sender, parts: list[str]) -> set[str]:
    """The device selector as docs/protocol.md states it: all, phone/mobile, desktop, names, ids."""
    devices = {sender.phone.device_id: ("phone", "pixel"), sender.laptop.device_id: ("cli", "laptop")}
    chosen: set[str] = set()
    for part in parts:
        wanted = part.lower()
        for device_id, (kind, name) in devices.items():
            if (
                wanted == "all"
                or (wanted in ("phone", "mobile") and kind == "phone")
                or (wanted == "desktop" and kind != "phone")
                or part == device_id
                or wanted == name
            ):
                chosen.add(device_id)
    return chosen


@HTTP
@given(data=st.data())
def test_device_selectors_reach_exactly_the_devices_they_name(sender: Sender, data: st.DataObject) -> None:
    ids = [sender.phone.device_id, sender.laptop.device_id]
    part = st.one_of(
        any_case(["all", "phone", "mobile", "desktop", "pixel", "laptop"]), st.sampled_from(ids), texts
    )
    value = data.draw(st.one_of(st.lists(part, max_size=22), st.lists(part, max_size=22).map(",".join)))
    response = sender.send(
        json.dumps({"message": "hi", "device": value}).encode(), {"Content-Type": "application/json"}
    )
    try:
        selected = parse_device_selector(value)
    except InvalidFieldError:
        assert response.status_code == 400
        return
    expected = expected_targets(sender, list(selected))
    if not expected:  # nothing delivered is never a success
        assert response.status_code == 400 and response.json()["error"]["code"] == "no_matching_device"
        return
    assert response.status_code == 200, response.text
    delivered = {target["device_id"] for target in response.json()["delivered_to"]}
    assert delivered == expected
    unmatched = [s for s in selected if not expected_targets(sender, [s])]
    assert len(response.json()["warnings"]) == len(unmatched)
