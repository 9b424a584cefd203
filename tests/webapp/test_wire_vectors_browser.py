"""The browser wire code against every interoperability vector, in real Chromium and served by a
live relaybox: from a page (the ES module: envelopes, safety number, chunks) and from the web
app's service worker (the classic script it imports: envelopes and safety number). Positive cases
go both ways (outputs from inputs, inputs from outputs); every negative case raises the named error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext

from tests.browser import watched

ROOT = Path(__file__).resolve().parents[2]
RUN_VECTORS = (Path(__file__).parent / "run_vectors.js").read_text()


def vectors() -> dict[str, Any]:
    files = {"envelope": "envelope.json", "safety": "safety_number.json", "chunks": "chunks.json"}
    return {name: json.loads((ROOT / "vectors" / file).read_text()) for name, file in files.items()}


def test_a_page_reproduces_and_reverses_every_vector(live_server: str, context: BrowserContext) -> None:
    page = context.new_page()
    watch = watched(page, live_server)
    page.goto(live_server + "/app/")
    given = vectors()
    produced = page.evaluate(RUN_VECTORS, {"vectors": given, "inWorker": False})
    assert_envelopes_and_safety_numbers(given, produced)
    assert_chunks(given["chunks"], produced)
    assert watch.problems() == []


def test_the_service_worker_loads_nacl_and_passes_the_envelope_and_safety_vectors(
    live_server: str, context: BrowserContext
) -> None:
    page = context.new_page()
    with context.expect_event("serviceworker", timeout=10_000) as registered:
        page.goto(live_server + "/app/")
    worker = registered.value
    assert worker.url == live_server + "/app/sw.js"
    assert page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)") == live_server + "/app/"
    given = vectors()
    produced = worker.evaluate(RUN_VECTORS, {"vectors": given, "inWorker": True})
    assert_envelopes_and_safety_numbers(given, produced)
    assert "derivation" not in produced  # chunks are the pages' (noble is an ES module)


def assert_envelopes_and_safety_numbers(given: dict[str, Any], produced: dict[str, Any]) -> None:
    for case, got in zip(given["envelope"]["cases"], produced["envelope"], strict=True):
        assert got["sealed"] == case["envelope"], case["name"]
        assert got["opened"] == case["plaintext"], case["name"]
        assert got["senderPublic"] == case["sender_public"]
        assert got["recipientPublic"] == case["recipient_public"]
        assert got["text"] == case.get("plaintext_utf8")
    for case, got in zip(given["envelope"]["negative"], produced["envelopeNegative"], strict=True):
        assert got["raised"] == {"name": case["error"], "inFamily": True, "isValueError": True}, case["name"]
    for case, got in zip(given["safety"]["cases"], produced["safety"], strict=True):
        assert got["forward"] == got["backward"] == case["number"], case["name"]
        assert got["formatted"] == case["formatted"]


def assert_chunks(given: dict[str, Any], produced: dict[str, Any]) -> None:
    for case, got in zip(given["key_derivation"], produced["derivation"], strict=True):
        assert got == {"shared": case["shared_secret"], "key": case["key"]}
    for transfer, files in zip(given["transfers"], produced["transfers"], strict=True):
        for file, got in zip(transfer["files"], files, strict=True):
            for chunk, made in zip(file["chunks"], got["chunks"], strict=True):
                assert made == {
                    "nonce": chunk["nonce"],
                    "associatedData": chunk["associated_data"],
                    "sealed": chunk["ciphertext"],
                    "opened": chunk["plaintext"],
                }, (file["file_id"], chunk["index"])
            assert got["sealedFile"] == [chunk["ciphertext"] for chunk in file["chunks"]]
            assert got["openedFile"] == file["plaintext"]
    for case, got in zip(given["negative"], produced["chunkNegative"], strict=True):
        assert got["raised"] == {"name": case["error"], "inFamily": True, "isValueError": True}, case["name"]
