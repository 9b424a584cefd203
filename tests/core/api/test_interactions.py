"""Questions to the phone: creation and duplicates, the pending cap, answers, expiry, ownership
(typed replies: test_typed_replies.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.services.interaction_models import InteractionCreate
from core.services.interactions import Answer, answer_interaction, create_interaction, get_interaction
from tests.helpers import (
    FakeDevice,
    create_token,
    error_code,
    pair_computer,
    queued_payloads,
    register_phone,
    tables_containing,
)


def setup(client: TestClient, **phone_fields: Any) -> tuple[FakeDevice, dict[str, str]]:
    phone = register_phone(client, **phone_fields)
    return phone, {"Authorization": f"Bearer {create_token(client, phone)['token']}"}


def ask(client: TestClient, headers: dict[str, str], **fields: Any) -> Any:
    return client.post("/v1/interactions", json={"question": "Deploy to prod?", **fields}, headers=headers)


def test_a_new_question_is_201_pending_with_default_expiry(client: TestClient, clock: ManualClock) -> None:
    _, headers = setup(client)
    response = ask(client, headers)
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("int_") and body["status"] == "pending" and body["created"] is True
    assert body["expires_at"] == int(clock.now()) + 600


def test_the_same_question_from_the_same_token_is_a_200_duplicate(client: TestClient, core: Core) -> None:
    _, headers = setup(client)
    first = ask(client, headers).json()
    again = ask(client, headers)
    assert again.status_code == 200 and again.json()["id"] == first["id"] and again.json()["created"] is False
    different_choices = ask(client, headers, choices=["Yes", "No"])
    assert different_choices.status_code == 201


def test_the_same_idempotency_key_is_a_duplicate_whatever_the_question(client: TestClient) -> None:
    _, headers = setup(client)
    first = ask(client, headers, idempotency_key="deploy-42").json()
    again = client.post(
        "/v1/interactions", json={"question": "other", "idempotency_key": "deploy-42"}, headers=headers
    )
    assert again.status_code == 200 and again.json()["id"] == first["id"]


def test_another_token_does_not_share_duplicates_or_see_the_interaction(client: TestClient) -> None:
    phone, headers = setup(client)
    other = {"Authorization": f"Bearer {create_token(client, phone)['token']}"}
    first = ask(client, headers).json()
    assert ask(client, other).status_code == 201
    hidden = client.get(f"/v1/interactions/{first['id']}?wait=0", headers=other)
    assert hidden.status_code == 404 and error_code(hidden) == "not_found"


def test_the_window_survives_an_answer_and_ends_at_expiry(client: TestClient, clock: ManualClock) -> None:
    phone, headers = setup(client)
    first = ask(client, headers, expires_in_seconds=60).json()
    client.post(f"/v1/interactions/{first['id']}/answer", json={"choice_index": 0}, headers=phone.auth)
    after_answer = ask(client, headers, expires_in_seconds=60)
    assert after_answer.status_code == 200 and after_answer.json()["status"] == "answered"
    clock.advance(60)
    after_expiry = ask(client, headers, expires_in_seconds=60)
    assert after_expiry.status_code == 201 and after_expiry.json()["id"] != first["id"]


def test_an_owner_may_have_at_most_10_pending(client: TestClient, clock: ManualClock) -> None:
    phone, headers = setup(client)
    ids = [ask(client, headers, question=f"q{n}").json()["id"] for n in range(10)]
    refused = ask(client, headers, question="q10")
    assert refused.status_code == 429 and error_code(refused) == "too_many_pending"
    assert ask(client, headers, question="q0").status_code == 200  # a duplicate still answers
    client.post(f"/v1/interactions/{ids[0]}/answer", json={"choice_index": 1}, headers=phone.auth)
    assert ask(client, headers, question="q10").status_code == 201


def test_an_answer_is_visible_with_index_and_time(client: TestClient, clock: ManualClock) -> None:
    phone, headers = setup(client)
    created = ask(client, headers, choices=["A", "B", "C"]).json()
    clock.advance(5)
    answered = client.post(
        f"/v1/interactions/{created['id']}/answer", json={"choice_index": 2}, headers=phone.auth
    )
    assert answered.status_code == 200
    polled = client.get(f"/v1/interactions/{created['id']}?wait=0", headers=headers).json()
    assert (polled["status"], polled["choice_index"], polled["answered_at"]) == (
        "answered",
        2,
        int(clock.now()),
    )


def test_every_device_of_the_account_hears_the_question_closed_and_by_whom(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone, headers = setup(client, name="Pixel")
    laptop = pair_computer(client, phone, name="laptop")
    created = ask(client, headers, choices=["Ship it", "Wait"], expires_in_seconds=120).json()
    assert queued_payloads(core, phone, "interaction_closed") == []  # nothing until it is answered
    clock.advance(5)
    client.post(f"/v1/interactions/{created['id']}/answer", json={"choice_index": 1}, headers=phone.auth)
    closed = {
        "type": "interaction_closed",
        "id": created["id"],
        "reason": "answered",
        "answered_by": {"device_id": phone.device_id, "name": "Pixel"},
        "choice_index": 1,
        "at": int(clock.now()),
    }
    assert queued_payloads(core, phone, "interaction_closed") == [closed]  # the phone may run twice
    assert queued_payloads(core, laptop, "interaction_closed") == [closed]
    late = client.post(
        f"/v1/interactions/{created['id']}/answer", json={"choice_index": 0}, headers=phone.auth
    )
    assert late.status_code == 409 and len(queued_payloads(core, laptop, "interaction_closed")) == 1


def test_the_first_tap_wins_and_later_ones_are_409(client: TestClient) -> None:
    phone, headers = setup(client)
    created = ask(client, headers).json()
    client.post(f"/v1/interactions/{created['id']}/answer", json={"choice_index": 0}, headers=phone.auth)
    late = client.post(
        f"/v1/interactions/{created['id']}/answer", json={"choice_index": 1}, headers=phone.auth
    )
    assert late.status_code == 409 and error_code(late) == "already_answered"


def test_two_answers_at_once_exactly_one_wins(client: TestClient, core: Core) -> None:
    phone, headers = setup(client)
    created = ask(client, headers).json()
    principal = Principal.device(account_id=phone.account_id, device_id=phone.device_id, surface_kind="phone")
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def tap(index: int) -> None:
        barrier.wait()
        try:
            core.run_sync(
                answer_interaction,
                principal,
                interaction_id=created["id"],
                body=Answer(choice_index=index % 2),
            )
            outcomes.append("won")
        except RelayError as error:
            outcomes.append(error.code)

    threads = [threading.Thread(target=tap, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(outcomes) == ["already_answered"] * 3 + ["won"]


def test_an_expired_question_cannot_be_answered(client: TestClient, clock: ManualClock) -> None:
    phone, headers = setup(client)
    created = ask(client, headers, expires_in_seconds=60).json()
    clock.advance(60)
    assert (
        client.get(f"/v1/interactions/{created['id']}?wait=0", headers=headers).json()["status"] == "expired"
    )
    late = client.post(
        f"/v1/interactions/{created['id']}/answer", json={"choice_index": 0}, headers=phone.auth
    )
    assert late.status_code == 409 and error_code(late) == "interaction_expired"


@pytest.mark.parametrize("choice_index", [2, 4, -1])
def test_a_choice_outside_the_offered_ones_is_refused(client: TestClient, choice_index: int) -> None:
    phone, headers = setup(client)
    created = ask(client, headers).json()
    response = client.post(
        f"/v1/interactions/{created['id']}/answer", json={"choice_index": choice_index}, headers=phone.auth
    )
    assert response.status_code == 400 and error_code(response) in {"invalid_choice", "invalid_body"}


def test_integers_are_json_integers_a_whole_number_with_a_fraction_included(client: TestClient) -> None:
    """Found by fuzzing: the document says integer, and JSON Schema's integer includes 600.0 and 1.0,
    which were refused as invalid_body; true and "600" still are."""
    phone, headers = setup(client)
    created = ask(client, headers, expires_in_seconds=600.0)
    assert created.status_code == 201
    answered = client.post(
        f"/v1/interactions/{created.json()['id']}/answer", json={"choice_index": 1.0}, headers=phone.auth
    )
    assert answered.status_code == 200 and answered.json()["choice_index"] == 1
    for wrong in (True, "600", 600.5):
        assert error_code(ask(client, headers, expires_in_seconds=wrong)) == "invalid_body"


def test_only_the_accounts_phone_answers(client: TestClient) -> None:
    _, headers = setup(client)
    stranger = register_phone(client)
    created = ask(client, headers).json()
    response = client.post(
        f"/v1/interactions/{created['id']}/answer", json={"choice_index": 0}, headers=stranger.auth
    )
    assert response.status_code == 404


def test_an_answer_to_no_such_question_is_404_and_a_computer_may_not_answer(client: TestClient) -> None:
    phone, headers = setup(client)
    created = ask(client, headers).json()
    unknown = client.post(
        "/v1/interactions/int_" + "0" * 32 + "/answer", json={"choice_index": 0}, headers=phone.auth
    )
    assert unknown.status_code == 404 and error_code(unknown) == "not_found"
    computer = pair_computer(client, phone)
    refused = client.post(
        f"/v1/interactions/{created['id']}/answer", json={"choice_index": 0}, headers=computer.auth
    )
    assert error_code(refused) == "not_a_phone"
    assert (
        client.get(f"/v1/interactions/{created['id']}?wait=0", headers=headers).json()["status"] == "pending"
    )


def test_a_device_removed_since_its_credential_was_checked_cannot_answer(
    client: TestClient, core: Core
) -> None:
    phone, headers = setup(client)
    created = ask(client, headers).json()
    gone = Principal.device(account_id=phone.account_id, device_id="dev_removed", surface_kind="phone")
    with pytest.raises(RelayError) as raised:
        core.run_sync(answer_interaction, gone, interaction_id=created["id"], body=Answer(choice_index=0))
    assert raised.value.code == "invalid_token"


@pytest.mark.parametrize(
    "fields",
    [
        {"question": ""},
        {"question": "q" * 1001},
        {"choices": ["only one"]},
        {"choices": ["a", "b", "c", "d", "e"]},
        {"choices": ["a", ""]},
        {"choices": ["a", "b" * 49]},
        {"expires_in_seconds": 59},
        {"expires_in_seconds": 86_401},
        {"idempotency_key": ""},
        {"idempotency_key": "k" * 129},
        # Typed replies: [] only with allow_text, never one choice, text_max_chars only with it, 1-1000.
        {"choices": []},
        {"choices": ["only"], "allow_text": True},
        {"text_max_chars": 100},
        {"allow_text": False, "text_max_chars": 100},
        {"allow_text": True, "text_max_chars": 0},
        {"allow_text": True, "text_max_chars": 1001},
        {"allow_text": "yes"},
        {"allow_text": 1},
    ],
)
def test_out_of_bounds_questions_are_invalid_body(client: TestClient, fields: dict[str, Any]) -> None:
    _, headers = setup(client)
    response = client.post("/v1/interactions", json={"question": "q", **fields}, headers=headers)
    assert response.status_code == 400 and error_code(response) == "invalid_body"


def test_the_typed_reply_bounds_themselves_are_allowed(client: TestClient) -> None:
    _, headers = setup(client)
    for fields in (
        {"allow_text": True, "text_max_chars": 1},
        {"allow_text": True, "text_max_chars": 1000, "choices": []},
        {"allow_text": False, "choices": ["x", "y", "z", "w"]},
    ):
        assert ask(client, headers, **fields).status_code == 201, fields


def test_wait_must_be_a_whole_number_and_is_clamped(client: TestClient) -> None:
    _, headers = setup(client)
    created = ask(client, headers).json()
    assert (
        error_code(client.get(f"/v1/interactions/{created['id']}?wait=soon", headers=headers))
        == "invalid_wait"
    )
    assert client.get(f"/v1/interactions/{created['id']}?wait=-4", headers=headers).status_code == 200


@pytest.mark.parametrize("wait", ["\u00b2", "--5", "1-", "\u0665"])
def test_a_wait_in_other_digits_or_signs_is_invalid_wait(client: TestClient, wait: str) -> None:
    """Found while fixing since_id: these passed the isdigit check, then int() raised (a 500)."""
    _, headers = setup(client)
    created = ask(client, headers).json()
    response = client.get(f"/v1/interactions/{created['id']}", params={"wait": wait}, headers=headers)
    assert response.status_code == 400 and error_code(response) == "invalid_wait"


def test_an_unknown_id_is_404(client: TestClient) -> None:
    _, headers = setup(client)
    response = client.get("/v1/interactions/int_" + "0" * 32 + "?wait=0", headers=headers)
    assert response.status_code == 404 and error_code(response) == "not_found"


def test_an_outdated_phone_is_426_but_an_unknown_build_is_fine(client: TestClient, core: Core) -> None:
    core.settings = core.settings.model_copy(update={"min_build_interactions": 10})
    _, unknown = setup(client)
    assert ask(client, unknown).status_code == 201
    _, outdated = setup(client, app_build=2)
    response = ask(client, outdated)
    assert response.status_code == 426 and error_code(response) == "phone_app_outdated"


def test_a_phone_too_old_for_typed_replies_gets_426_for_those_only(client: TestClient, core: Core) -> None:
    core.settings = core.settings.model_copy(update={"min_build_interaction_text": 5})
    _, headers = setup(client, app_build=4)
    refused = ask(client, headers, allow_text=True)
    assert refused.status_code == 426 and error_code(refused) == "phone_app_outdated"
    assert ask(client, headers).status_code == 201


def test_the_question_and_choices_are_never_stored(client: TestClient, core: Core) -> None:
    _, headers = setup(client)
    ask(client, headers, question="QUESTION-MARKER-aa1", choices=["CHOICE-MARKER-bb2", "other"])
    assert tables_containing(core.engine, "QUESTION-MARKER") == []
    assert tables_containing(core.engine, "CHOICE-MARKER") == []


def test_created_is_said_on_the_create_answer_only(client: TestClient) -> None:
    """A read is not a create: GET leaves ``created`` out instead of saying false of a question
    that was created."""
    _, headers = setup(client)
    asked = ask(client, headers).json()
    read = client.get(f"/v1/interactions/{asked['id']}", headers=headers).json()
    assert asked["created"] is True and "created" not in read


def test_a_question_is_read_by_the_credential_that_asked_it_only(client: TestClient, core: Core) -> None:
    """A sender token of the account may not read a question an assistant asked (nor the other
    way): the first read takes a typed reply, which is the asker's alone (docs/protocol.md)."""
    phone, headers = setup(client)
    assistant = Principal.connector_grant(
        account_id=phone.account_id,
        client_id="assistant",
        grant_id="grant_assistant",
        scopes=frozenset({"approvals:write"}),
    )
    asked = core.run_sync(
        create_interaction, assistant, body=InteractionCreate(question="Merge the release?"), ip="127.0.0.1"
    )
    assert client.get(f"/v1/interactions/{asked.id}", headers=headers).status_code == 404
    own = ask(client, headers).json()
    with pytest.raises(RelayError) as raised:
        core.run_sync(get_interaction, assistant, interaction_id=own["id"])
    assert raised.value.code == "not_found"
