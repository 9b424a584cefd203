"""How secrets are compared and what the server echoes.

- Every secret a caller presents is checked against its stored SHA-256 with ``hmac.compare_digest``
  (found by a hashed lookup first): shown by watching ``compare_digest`` while each kind of
  credential is used, and by a structural check that no plain ``==`` touches a secret-named value.
- Secrets loaded from settings (the server key, the VAPID key, the FCM service account) never
  appear in ``/healthz``, ``/readyz``, ``/metrics``, ``/openapi.json`` or an error body, even when
  the failure's own text carries one.
"""

from __future__ import annotations

import ast
import base64
import hmac
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy.exc import OperationalError
from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.domain.secrets import digest
from core.runtime.core import Core
from core.settings import Settings
from tests.connector.test_mcp_auth import ACCEPT
from tests.fakes.fcm_server import FakeFcm, make_service_account
from tests.fakes.webpush_server import new_vapid_private_key
from tests.helpers import create_token, register_phone
from tests.oauth.flow import connect, refresh

REPO = Path(__file__).resolve().parents[2]

# -- compared in constant time -----------------------------------------------------------------------


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every argument ``hmac.compare_digest`` receives from now on."""
    seen: list[bytes] = []
    original = hmac.compare_digest

    def recording(a: Any, b: Any) -> bool:
        seen.extend(x if isinstance(x, bytes) else str(x).encode() for x in (a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    return seen


def test_every_presented_credential_is_checked_with_compare_digest(
    client: TestClient, compared: list[bytes]
) -> None:
    phone = register_phone(client)
    token = str(create_token(client, phone)["token"])
    request, tokens = connect(client, phone, scopes=["devices:read"])
    compared.clear()

    uses: dict[str, tuple[str, Callable[[], object]]] = {
        "sender token": (
            token,
            lambda: client.post("/v1/send", json={"message": "hi"}, headers=_bearer(token)),
        ),
        "device credential": (phone.token, lambda: client.get("/v1/devices/me", headers=phone.auth)),
        "OAuth access token": (
            tokens["access_token"],
            lambda: client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={**ACCEPT, **_bearer(tokens["access_token"])},
            ),
        ),
        "OAuth refresh token": (
            tokens["refresh_token"],
            lambda: refresh(client, request.client_id, tokens["refresh_token"]),
        ),
    }
    unchecked = []
    for kind, (secret, use) in uses.items():
        compared.clear()
        use()
        if digest(secret).encode() not in compared:
            unchecked.append(kind)
    assert not unchecked, f"not compared with hmac.compare_digest: {unchecked}"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


SECRET_NAMED = re.compile(
    r"token|credential|secret|nonce|csrf|digest|hash|password|verifier|code", re.IGNORECASE
)


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return None


def _harmless(node: ast.expr) -> bool:
    """A literal, a module constant (ALL_CAPS), a length, or a SQL column expression ``col(...)``
    (a lookup of the stored hash by the database, which compares hashes, never the secret)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in {"col", "len"}
    name = _name(node)
    return name is not None and name.isupper()


def test_no_plain_equality_touches_a_secret_named_value() -> None:
    """Secrets are compared as digests with ``compare_digest`` (``core.domain.secrets.digests_match``)
    or looked up by their hash in SQL; a ``==`` or ``!=`` in Python on anything named like a token,
    credential, code, nonce, digest or hash would be a timing side channel, so none may exist."""
    found = []
    for package in ("core", "oauth", "connector"):
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Compare) or not any(
                    isinstance(op, ast.Eq | ast.NotEq) for op in node.ops
                ):
                    continue
                operands = [node.left, *node.comparators]
                if any(_harmless(operand) for operand in operands):
                    continue
                if any((name := _name(operand)) and SECRET_NAMED.search(name) for operand in operands):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found


# -- never echoed ------------------------------------------------------------------------------------


@pytest.fixture
def secret_settings(settings: Settings, tmp_path: Path, fcm: FakeFcm) -> tuple[Settings, list[str]]:
    """Settings holding every kind of secret, and the strings that must never be shown."""
    account = make_service_account(fcm.origin)
    credentials = tmp_path / "service-account.json"
    credentials.write_text(json.dumps(account))
    server_key = base64.b64encode(b"k" * 32).decode()
    vapid = new_vapid_private_key()
    configured = settings.model_copy(
        update={
            "server_secret_key": SecretStr(server_key),
            "fcm_credentials_file": credentials,
            "fcm_url": fcm.origin,
            "vapid_private_key": vapid,
        }
    )
    pem_lines = [
        line for line in account["private_key"].splitlines() if line and not line.startswith("-----")
    ]
    vapid_lines = [
        line for line in vapid.get_secret_value().splitlines() if line and not line.startswith("-----")
    ]
    return configured, [server_key, account["private_key_id"], *pem_lines, *vapid_lines]


@pytest.fixture
def secret_app(secret_settings: tuple[Settings, list[str]]) -> Iterator[tuple[TestClient, Core]]:
    core = build_core(secret_settings[0])
    with TestClient(create_app(core=core), raise_server_exceptions=False) as client:
        yield client, core
    core.engine.dispose()


def test_settings_secrets_are_never_echoed_by_health_metrics_or_errors(
    secret_app: tuple[TestClient, Core],
    secret_settings: tuple[Settings, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    summary: Callable[[str], None],
) -> None:
    client, core = secret_app
    _, secrets = secret_settings
    phone = register_phone(client)
    token = str(create_token(client, phone)["token"])
    responses = [
        client.get("/healthz"),
        client.get("/readyz"),
        client.get("/metrics"),
        client.get("/openapi.json"),
        client.get("/nowhere"),
        client.put("/v1/send"),
        client.post("/v1/send", content=b"{", headers={**_bearer(token), "Content-Type": "application/json"}),
        client.post("/v1/send", json={"message": "hi"}, headers=_bearer("rfk_live_" + "x" * 32)),
        client.post("/v1/send", json={"message": "hi"}),
    ]
    # Failures whose own text carries every secret: an unexpected error and a database outage.
    leaky = " ".join(secrets)
    failures: list[BaseException] = [RuntimeError(leaky), OperationalError(leaky, {}, Exception(leaky))]
    for failure in failures:

        async def failing(*_args: object, failure: BaseException = failure, **_kw: object) -> None:
            raise failure

        monkeypatch.setattr(core, "run", failing)
        responses.append(client.post("/v1/send", json={"message": "hi"}, headers=_bearer(token)))
    statuses = [response.status_code for response in responses]
    assert statuses[-2:] == [500, 503], statuses
    shown = [
        f"{r.request.method} {r.request.url.path} {r.status_code}"
        for r in responses
        if any(s in r.text or s in str(r.headers) for s in secrets)
    ]
    assert not shown, shown
    summary(
        f"secrets[{core.engine.dialect.name}]: {len(secrets)} settings secrets, "
        f"0 in {len(responses)} health, metrics and error responses"
    )
