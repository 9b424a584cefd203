"""``relaybox phone connect CODE``: the virtual phone confirms a consent page's code."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.cli import main
from client import phone
from tests.helpers import start_pairing
from tests.oauth.flow import Authorization, open_consent, register_client


def test_connect_confirms_the_code_and_names_the_client(
    live_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "phone.json"
    phone.register(state, server=live_server)
    with httpx.Client(base_url=live_server, timeout=10) as http:
        page = open_consent(
            http, Authorization(register_client(http, client_name="Cursor")["client_id"]).url()
        )
        assert main(["phone", "connect", f"{page.code[:3]} {page.code[3:]}", "--state", str(state)]) == 0
        assert http.get(page.status_url, params={"wait": 0}).json()["status"] == "confirmed"
    out = capsys.readouterr().out
    assert "Cursor asks to connect" in out
    assert "approve on the page" in out


def test_connect_never_redeems_a_computers_pairing_code(
    live_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "phone.json"
    phone.register(state, server=live_server)
    with httpx.Client(base_url=live_server, timeout=10) as http:
        computer, code = start_pairing(http)
        assert main(["phone", "connect", code, "--state", str(state)]) == 1
        assert http.get("/v1/pair/result", headers=computer.auth).json()["status"] == "pending"
    assert capsys.readouterr().err.startswith("error: invalid_code: ")
