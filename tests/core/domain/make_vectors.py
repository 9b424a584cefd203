"""Write the interoperability vectors in vectors/ (run once; the JSON files are committed).

    .venv/bin/python tests/core/domain/make_vectors.py

Keys, nonces and prefixes are fixed (derived from labels with SHA-256), so running it again
gives identical files. The tests read the committed files; they never call this script.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import nacl.bindings

from core.domain import chunks, envelope, safety
from core.domain.canonical import canonical_json
from core.domain.keys import public_key_of

VECTORS_DIR = Path(__file__).resolve().parents[3] / "vectors"


def fixed(label: str, length: int = 32) -> bytes:
    """Deterministic bytes for a label, so that no vector depends on a random source."""
    return hashlib.sha256(b"relaybox-vectors/" + label.encode()).digest()[:length]


ALICE_SECRET = fixed("alice-computer-secret")
BOB_SECRET = fixed("bob-phone-secret")
SERVER_SECRET = fixed("server-secret")
EVE_SECRET = fixed("eve-secret")
ALICE, BOB, SERVER, EVE = (public_key_of(s) for s in (ALICE_SECRET, BOB_SECRET, SERVER_SECRET, EVE_SECRET))


def text_or_none(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def envelope_vectors() -> dict[str, Any]:
    payload = canonical_json({"type": "notification", "title": "Grüße 👋", "body": "naïve café — 日本語"})
    specs = [
        ("ascii plaintext, computer to phone", ALICE_SECRET, BOB, b"hello, phone", bytes(range(24))),
        ("empty plaintext (the 41-byte minimum)", ALICE_SECRET, BOB, b"", b"\xff" * 24),
        ("unicode JSON payload, phone to computer", BOB_SECRET, ALICE, payload, fixed("nonce-3", 24)),
        (
            "server-composed message to the phone",
            SERVER_SECRET,
            BOB,
            b'{"type":"ping"}',
            fixed("nonce-4", 24),
        ),
        (
            "300-byte binary plaintext",
            ALICE_SECRET,
            BOB,
            bytes(i % 256 for i in range(300)),
            fixed("nonce-5", 24),
        ),
    ]
    secrets = {ALICE: ALICE_SECRET, BOB: BOB_SECRET, SERVER: SERVER_SECRET}
    cases = []
    for name, sender_secret, recipient, plaintext, nonce in specs:
        sender = public_key_of(sender_secret)
        cases.append(
            {
                "name": name,
                "sender_secret": sender_secret.hex(),
                "sender_public": sender.hex(),
                "recipient_secret": secrets[recipient].hex(),
                "recipient_public": recipient.hex(),
                "nonce": nonce.hex(),
                "plaintext": plaintext.hex(),
                "plaintext_utf8": text_or_none(plaintext),
                "envelope": envelope.seal(plaintext, sender_secret, recipient, nonce).hex(),
            }
        )
    good = bytes.fromhex(str(cases[0]["envelope"]))
    empty = bytes.fromhex(str(cases[1]["envelope"]))

    def flip(blob: bytes, position: int) -> bytes:
        return blob[:position] + bytes([blob[position] ^ 0x01]) + blob[position + 1 :]

    negatives = [
        ("version byte 0x02", b"\x02" + good[1:], BOB_SECRET, "UnsupportedWireVersion"),
        ("version byte 0x00", b"\x00" + good[1:], BOB_SECRET, "UnsupportedWireVersion"),
        ("40 bytes: one short of the minimum", empty[:40], BOB_SECRET, "EnvelopeTooShort"),
        ("empty blob", b"", BOB_SECRET, "EnvelopeTooShort"),
        ("short blob with a bad version byte (length is checked first)", b"\x02" * 10, BOB_SECRET,
         "EnvelopeTooShort"),
        ("tampered tag", flip(good, 1 + 24), BOB_SECRET, "EnvelopeOpenFailed"),
        ("tampered nonce", flip(good, 1), BOB_SECRET, "EnvelopeOpenFailed"),
        ("tampered ciphertext", flip(good, len(good) - 1), BOB_SECRET, "EnvelopeOpenFailed"),
        ("opened by a third party", good, EVE_SECRET, "EnvelopeOpenFailed"),
    ]  # fmt: skip
    return {
        "format": "relaybox envelope v1: 0x01 || nonce(24) || crypto_box(plaintext) (tag(16) || ciphertext)",
        "description": "Keys, nonces, plaintexts and envelopes are hex. Seal with the given nonce must "
        "give exactly `envelope`; opening `envelope` with recipient_secret and sender_public must give "
        "`plaintext`.",
        "cases": cases,
        "negative": [
            {
                "name": name,
                "envelope": blob.hex(),
                "recipient_secret": recipient_secret.hex(),
                "sender_public": ALICE.hex(),
                "error": error,
            }
            for name, blob, recipient_secret, error in negatives
        ],
    }


def safety_vectors() -> dict[str, Any]:
    base = fixed("safety-base")
    pairs = [
        ("computer and phone, low key first", min(ALICE, BOB), max(ALICE, BOB)),
        ("computer and phone, high key first", max(ALICE, BOB), min(ALICE, BOB)),
        ("keys differ only in the last byte", base[:31] + b"\x01", base[:31] + b"\x00"),
        ("first byte 0x80 sorts after 0x7f (unsigned order)", b"\x80" + base[1:], b"\x7f" + base[1:]),
        ("all-zero and all-0xff keys", b"\xff" * 32, b"\x00" * 32),
        ("server and phone", SERVER, BOB),
    ]
    cases = []
    for name, a, b in pairs:
        number = safety.safety_number(a, b)
        cases.append(
            {
                "name": name,
                "public_a": a.hex(),
                "public_b": b.hex(),
                "a_sorts_first": a < b,
                "number": number,
                "formatted": safety.format_safety_number(number),
            }
        )
    return {
        "format": "platform-safety-v1: SHA-512^5200(tag || low || high), 12 x (u40be mod 100000)",
        "description": "Public keys are hex. safety_number(public_a, public_b) and safety_number(public_b, "
        "public_a) must both equal `number`.",
        "cases": cases,
    }


def chunk_vectors() -> dict[str, Any]:
    transfer_id = "tr_0123456789abcdef"
    key = chunks.derive_chunk_key(ALICE_SECRET, BOB, transfer_id)
    prefix = fixed("chunk-prefix", 16)
    files = [
        ("file-1", b"hello, chunk", 64, 0),
        ("file-2", bytes(i % 251 for i in range(40)), 16, 1),  # 16 + 16 + 8: indices 1, 2, 3 (final)
        ("file-3-empty", b"", 16, 4),
        ("file-4-ünïcödé", "Grüße aus 日本 👋".encode(), 8, 5),
    ]
    file_entries: list[dict[str, Any]] = []
    for file_id, data, chunk_size, first_index in files:
        cipher = chunks.ChunkCipher(key, prefix, transfer_id, file_id)
        sealed = cipher.seal_file(data, first_index=first_index, chunk_size=chunk_size)
        entries = []
        for offset, ciphertext in enumerate(sealed):
            index = first_index + offset
            is_final = offset == len(sealed) - 1
            piece = data[offset * chunk_size : (offset + 1) * chunk_size]
            entries.append(
                {
                    "index": index,
                    "is_final": is_final,
                    "plaintext": piece.hex(),
                    "nonce": chunks.chunk_nonce(prefix, index).hex(),
                    "associated_data": chunks.associated_data(
                        transfer_id, file_id, index, is_final=is_final
                    ).hex(),
                    "ciphertext": ciphertext.hex(),
                }
            )
        file_entries.append(
            {
                "file_id": file_id,
                "chunk_size": chunk_size,
                "first_index": first_index,
                "plaintext": data.hex(),
                "chunks": entries,
            }
        )
    file2 = file_entries[1]["chunks"]
    final_ct = bytes.fromhex(file2[2]["ciphertext"])
    middle_ct = bytes.fromhex(file2[1]["ciphertext"])
    tampered = middle_ct[:-1] + bytes([middle_ct[-1] ^ 0x80])
    negatives = [
        ("tampered tag", "file-2", 2, False, tampered),
        ("chunk presented at another index (reordered)", "file-2", 3, False, middle_ct),
        ("final chunk opened as not final (extra chunk follows)", "file-2", 3, False, final_ct),
        ("middle chunk opened as final (file truncated)", "file-2", 2, True, middle_ct),
        ("chunk moved to another file", "file-1", 2, False, middle_ct),
        ("ciphertext truncated by one byte", "file-2", 2, False, middle_ct[:-1]),
        ("ciphertext shorter than the tag", "file-2", 2, False, middle_ct[:15]),
    ]
    return {
        "format": chunks.CHUNK_FORMAT,
        "description": "Bytes are hex. key = HKDF-SHA-256(ikm=X25519(secret, public), "
        "salt=UTF-8 transfer_id, info=ASCII format, L=32); nonce = nonce_prefix || u64be index; "
        "associated_data = ASCII format || u16be len || transfer_id || u16be len || file_id || u64be index "
        "|| u8 is_final; ciphertext includes the 16-byte tag at the end.",
        "key_derivation": [
            {
                "my_secret": my_secret.hex(),
                "their_public": their_public.hex(),
                "transfer_id": transfer_id,
                "shared_secret": nacl.bindings.crypto_scalarmult(my_secret, their_public).hex(),
                "key": chunks.derive_chunk_key(my_secret, their_public, transfer_id).hex(),
            }
            for my_secret, their_public in ((ALICE_SECRET, BOB), (BOB_SECRET, ALICE))
        ],
        "transfers": [
            {
                "transfer_id": transfer_id,
                "key": key.hex(),
                "nonce_prefix": prefix.hex(),
                "files": file_entries,
            }
        ],
        "negative": [
            {
                "name": name,
                "transfer_id": transfer_id,
                "file_id": file_id,
                "key": key.hex(),
                "nonce_prefix": prefix.hex(),
                "index": index,
                "is_final": is_final,
                "ciphertext": ciphertext.hex(),
                "error": "ChunkError",
            }
            for name, file_id, index, is_final, ciphertext in negatives
        ],
    }


def write(name: str, content: dict[str, Any]) -> None:
    path = VECTORS_DIR / name
    path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def main() -> None:
    write("envelope.json", envelope_vectors())
    write("safety_number.json", safety_vectors())
    write("chunks.json", chunk_vectors())


if __name__ == "__main__":
    main()
