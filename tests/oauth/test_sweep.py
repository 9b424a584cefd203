"""Expiry sweeps: codes, tokens and consent sessions go when nothing can use them any more, but
not before a replay could still be detected. (The app sweeps by itself too, so the tests look at
what is left, not at the counts one sweep reports.)"""

from __future__ import annotations

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import sweep_expired
from core.store.tables import ConsentSession
from oauth.maintenance import sweep_oauth
from oauth.tables import OAuthAuthorizationCode, OAuthToken
from tests.helpers import register_phone
from tests.oauth.flow import Authorization, approve, connect, exchange, open_consent, refresh, register_client


def count(core: Core, table: type[OAuthToken] | type[OAuthAuthorizationCode] | type[ConsentSession]) -> int:
    with Session(core.engine) as session:
        return len(session.exec(select(table)).all())


def test_a_redeemed_code_is_kept_until_it_expires_so_its_reuse_is_still_caught(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"])
    code = approve(client, phone, request)["code"]
    assert exchange(client, request, code).status_code == 200
    core.run_sync(sweep_oauth, Principal.system())
    assert count(core, OAuthAuthorizationCode) == 1
    clock.advance(120)
    core.run_sync(sweep_oauth, Principal.system())
    assert count(core, OAuthAuthorizationCode) == 0


def test_a_token_row_goes_once_neither_of_its_tokens_can_be_used(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    request, first = connect(client, register_phone(client))
    second = refresh(client, request.client_id, first["refresh_token"]).json()
    clock.advance(3600)
    core.run_sync(sweep_oauth, Principal.system())
    assert count(core, OAuthToken) == 2  # the spent refresh token still catches a replay
    assert refresh(client, request.client_id, first["refresh_token"]).json()["error"] == "invalid_grant"
    assert refresh(client, request.client_id, second["refresh_token"]).json()["error"] == "invalid_grant"
    clock.advance(30 * 86_400)
    core.run_sync(sweep_oauth, Principal.system())
    assert count(core, OAuthToken) == 0


def test_consent_sessions_go_an_hour_after_they_expire(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    open_consent(client, Authorization(register_client(client)["client_id"]).url())
    clock.advance(300 + 3599)
    core.run_sync(sweep_expired, Principal.system())
    assert count(core, ConsentSession) == 1
    clock.advance(1)
    core.run_sync(sweep_expired, Principal.system())
    assert count(core, ConsentSession) == 0


def test_only_the_system_may_sweep(core: Core) -> None:
    with pytest.raises(RelayError):
        core.run_sync(sweep_oauth, Principal.anonymous("127.0.0.1"))
