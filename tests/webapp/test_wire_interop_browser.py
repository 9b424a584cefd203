"""Python and the browser wire code, with fresh keys: an envelope sealed in Python opens in the
browser and one sealed in the browser opens in Python; both compute the same safety number and
chunk key, and a file sealed on either side opens on the other. Canonical JSON and base64 give the
same bytes as core/domain, and refuse what it refuses."""

from __future__ import annotations

import base64
import math
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page

from core.domain.canonical import canonical_json
from core.domain.chunks import ChunkCipher, derive_chunk_key, new_nonce_prefix
from core.domain.envelope import open_envelope, seal
from core.domain.keys import b64encode, generate_keypair
from core.domain.safety import safety_number
from tests.browser import Watch, watched

IMPORT_WIRE = "window.wire = await import('/static/relaybox-wire.js')"
HEX = "window.hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')"
RAW = "window.raw = (t) => Uint8Array.from(t.match(/../g) || [], (p) => parseInt(p, 16))"
RAISED = "window.raised = (f) => { try { f(); return 'none'; } catch (e) { return e.name; } }"


@pytest.fixture
def wire_page(live_server: str, context: BrowserContext) -> Iterator[Watch]:
    """A page of the web app with the wire module and the helpers above on ``window``."""
    page = context.new_page()
    watch = watched(page, live_server)
    page.goto(live_server + "/app/")
    page.evaluate(f"async () => {{ {IMPORT_WIRE}; {HEX}; {RAW}; {RAISED}; }}")
    yield watch
    assert watch.problems() == []


def run(page: Page, body: str, arg: Any = None) -> Any:
    return page.evaluate(f"async (arg) => {{ {body} }}", arg)


def test_envelopes_cross_between_python_and_the_browser_both_ways(wire_page: Watch) -> None:
    page = wire_page.page
    python_secret, python_public = generate_keypair()
    browser_public = bytes.fromhex(
        run(page, "window.pair = wire.generateKeyPair(); return hex(window.pair.publicKey);")
    )
    payload = canonical_json({"type": "notification", "title": "Grüße 👋", "body": "from Python", "at": 1})
    opened = run(
        page,
        "return hex(wire.openEnvelope(raw(arg.blob), window.pair.secretKey, raw(arg.sender)));",
        {"blob": seal(payload, python_secret, browser_public).hex(), "sender": python_public.hex()},
    )
    assert bytes.fromhex(opened) == payload

    from_browser = run(
        page,
        "return hex(wire.sealEnvelope(wire.canonicalJson(arg.value), window.pair.secretKey, raw(arg.to)));",
        {"value": {"type": "text", "text": "from the browser ☃"}, "to": python_public.hex()},
    )
    assert open_envelope(bytes.fromhex(from_browser), python_secret, browser_public) == canonical_json(
        {"type": "text", "text": "from the browser ☃"}
    )
    shown = run(page, "return wire.safetyNumber(window.pair.publicKey, raw(arg));", python_public.hex())
    assert shown == safety_number(python_public, browser_public)


def test_file_chunks_cross_between_python_and_the_browser_both_ways(wire_page: Watch) -> None:
    page = wire_page.page
    python_secret, python_public = generate_keypair()
    transfer, data = "xfr_" + secrets.token_hex(8), secrets.token_bytes(2500)
    sent = run(
        page,
        """window.pair = wire.generateKeyPair();
        const key = wire.deriveChunkKey(window.pair.secretKey, raw(arg.peer), arg.transfer);
        const prefix = wire.newNoncePrefix();
        const cipher = new wire.ChunkCipher(key, prefix, arg.transfer, "f1");
        const chunks = cipher.sealFile(raw(arg.data), 7, 1000).map(hex);
        return { public: hex(window.pair.publicKey), key: hex(key), prefix: hex(prefix), chunks };""",
        {"peer": python_public.hex(), "transfer": transfer, "data": data.hex()},
    )
    key = derive_chunk_key(python_secret, bytes.fromhex(sent["public"]), transfer)
    assert key.hex() == sent["key"]
    cipher = ChunkCipher(key, bytes.fromhex(sent["prefix"]), transfer, "f1")
    assert cipher.open_file([bytes.fromhex(chunk) for chunk in sent["chunks"]], first_index=7) == data

    prefix = new_nonce_prefix()
    sealed = ChunkCipher(key, prefix, transfer, "f2").seal_file(data, first_index=10, chunk_size=999)
    opened = run(
        page,
        """const key = wire.deriveChunkKey(window.pair.secretKey, raw(arg.peer), arg.transfer);
        const cipher = new wire.ChunkCipher(key, raw(arg.prefix), arg.transfer, "f2");
        return hex(cipher.openFile(arg.chunks.map(raw), 10));""",
        {
            "peer": python_public.hex(),
            "transfer": transfer,
            "prefix": prefix.hex(),
            "chunks": [c.hex() for c in sealed],
        },
    )
    assert bytes.fromhex(opened) == data


# Values whose canonical JSON both sides must spell byte for byte. (A float with an integral value,
# like 2.0, is the number 2 in JavaScript: it prints as Python prints the int.)
CANONICAL_VALUES: list[Any] = [
    {"type": "notification", "title": "Grüße 👋", "body": "naïve café", "at": 1767225600, "tags": ["a", "b"]},
    {"z": 1, "a": 2, "m": {"nested": [1, 2, {"deep": None}]}},
    'quote " backslash \\ newline \n tab \t controls \x00\x01\x1f del \x7f separators \u2028\u2029',
    [True, False, None, 0, -1, 9007199254740991, -9007199254740991],
    [0.1, -2.5, 1e-07, 0.0001, 1e-05, 123.456, 5e-324, 3.141592653589793, 12345678901234.56, -0.000123],
    {},
    [],
    "",
]


def test_canonical_json_matches_core_domain_byte_for_byte(wire_page: Watch) -> None:
    produced = run(
        wire_page.page, "return arg.map((value) => hex(wire.canonicalJson(value)));", CANONICAL_VALUES
    )
    assert produced == [canonical_json(value).hex() for value in CANONICAL_VALUES]
    in_order = run(wire_page.page, "return wire.canonicalJsonText(new Map([['b', 1], ['1', 2]]));")
    assert in_order.encode() == canonical_json({"b": 1, "1": 2})


def test_canonical_json_refuses_what_python_refuses_and_what_it_cannot_say_exactly(wire_page: Watch) -> None:
    for refused in (math.nan, math.inf, "\ud800"):
        with pytest.raises(ValueError):  # noqa: PT011 - the refusal is the point; Python names no subclass
            canonical_json(refused)
    names = run(
        wire_page.page,
        """const cycle = {}; cycle.self = cycle;
        const cases = [NaN, Infinity, -Infinity, "\\ud800", {"a": undefined}, () => 1, 2 ** 53, new Date(0),
                       cycle, new Map([[1, "x"]])];
        return cases.map((value) => raised(() => wire.canonicalJson(value)));""",
    )
    assert names == ["ValueError"] * 10


def test_base64_is_the_json_apis_standard_alphabet_and_strict(wire_page: Watch) -> None:
    samples = [secrets.token_bytes(n) for n in (0, 1, 2, 3, 32, 70_000)]
    encoded = run(wire_page.page, "return arg.map((h) => wire.toBase64(raw(h)));", [s.hex() for s in samples])
    assert encoded == [b64encode(sample) for sample in samples]
    url_safe = run(
        wire_page.page, "return arg.map((h) => wire.toBase64Url(raw(h)));", [s.hex() for s in samples]
    )
    assert url_safe == [base64.urlsafe_b64encode(sample).decode().rstrip("=") for sample in samples]
    back = run(wire_page.page, "return arg.map((t) => hex(wire.fromBase64Url(t)));", url_safe)
    assert back == [sample.hex() for sample in samples]
    _, public = generate_keypair()
    spelled = b64encode(public)
    non_canonical = spelled[:42] + "B="  # the unused bits of the last character set
    refused = run(
        wire_page.page,
        """return arg.bad.map((t) => raised(() => wire.fromBase64(t)))
          .concat(arg.keys.map((t) => raised(() => wire.decodePublicKey(t))));""",
        {
            "bad": ["abc", "ab=c", "a b=", "ab-_", "=abc"],
            "keys": [non_canonical, spelled[:-4], "-" + spelled[1:]],
        },
    )
    assert refused == ["ValueError"] * 5 + ["InvalidPublicKey"] * 3
    assert run(wire_page.page, "return hex(wire.decodePublicKey(arg));", spelled) == public.hex()


def test_a_low_order_public_key_is_refused_as_in_python(wire_page: Watch) -> None:
    names = run(
        wire_page.page,
        """const zero = new Uint8Array(32), secret = wire.randomBytes(32);
        return [raised(() => new wire.PairBox(secret, zero)),
                raised(() => wire.deriveChunkKey(secret, zero, "x"))];""",
    )
    assert names == ["InvalidPublicKey", "ChunkError"]
