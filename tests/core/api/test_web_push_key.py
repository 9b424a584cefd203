"""GET /v1/push/web-key: the VAPID public key a browser subscribes with. A fresh server has one with
nothing configured (generated once into the data folder, 0600, kept across restarts); a configured
key is used as it is; with web push off the route says so."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from starlette.testclient import TestClient

from app.assembly import create_app
from core.adapters.push.vapid_key import KEY_FILE
from core.bootstrap import build_core
from core.settings import explicit_settings
from tests.fakes.webpush_server import new_vapid_private_key
from tests.helpers import error_code


def served_key(data_dir: Path, **settings: object) -> tuple[int, dict[str, str]]:
    with TestClient(create_app(core=build_core(explicit_settings(data_dir=data_dir, **settings)))) as client:
        answer = client.get("/v1/push/web-key")
        return answer.status_code, answer.json()


def point(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_fresh_server_generates_its_key_once_and_keeps_it(tmp_path: Path) -> None:
    status, body = served_key(tmp_path / "data")
    assert status == 200
    raw = point(body["application_server_key"])
    assert len(raw) == 65 and raw[0] == 4  # an uncompressed P-256 point
    key_file = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert served_key(tmp_path / "data") == (200, body)  # the same key after a restart


def test_a_configured_key_is_the_one_published(tmp_path: Path) -> None:
    configured = new_vapid_private_key()
    status, body = served_key(tmp_path / "data", vapid_private_key=configured)
    private = load_pem_private_key(configured.get_secret_value().encode(), password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    expected = private.public_key().public_numbers()
    raw = point(body["application_server_key"])
    assert status == 200
    assert raw[1:33] == expected.x.to_bytes(32, "big") and raw[33:] == expected.y.to_bytes(32, "big")
    assert not (tmp_path / "data" / KEY_FILE).exists()


def test_with_web_push_off_the_route_says_so(tmp_path: Path) -> None:
    with TestClient(
        create_app(core=build_core(explicit_settings(data_dir=tmp_path, web_push_enabled=False)))
    ) as client:
        answer = client.get("/v1/push/web-key")
    assert answer.status_code == 404 and error_code(answer) == "not_found"
    assert "not enabled" in answer.json()["error"]["message"]
