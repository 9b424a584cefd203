"""Schemathesis against the served /openapi.json, over a real socket: every operation with schema-valid
(positive) and schema-violating (negative) requests, then the call sequences schemathesis infers from
the responses (stateful). No 5xx, and every response as documented: its status, content type, body
schema and, for errors, a code the document lists for that status.

Credentials: a registered phone (with a paired computer) for device routes, a sender token with
``phone:control`` for caller routes, chosen per operation from its Endpoint declaration; rate limits
are raised so 429s do not hide other answers. ``RELAYBOX_FUZZ_EXAMPLES`` sets the examples per
operation and mode (see tests/fuzz/__init__.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, CheckContext, GenerationMode, Response
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.schemas import OpenApiSchema

from app.assembly import create_app
from core.adapters.outbound.resolver import StaticResolver
from core.api import endpoints
from core.api.routing import Endpoint
from core.bootstrap import build_core
from core.clock import ManualClock
from core.services.auth import Accept
from core.settings import explicit_settings
from tests.fuzz import fuzz_examples
from tests.helpers import create_token, pair_computer, register_phone
from tests.live import serve_in_thread

UNLIMITED = 10**9
LIMITS_RAISED: dict[str, Any] = dict.fromkeys(
    (
        "limit_token_burst",
        "limit_token_monthly",
        "limit_receiver_daily",
        "limit_ip_minute",
        "limit_ip_hour",
        "register_per_ip_per_minute",
        "pair_init_per_ip_per_minute",
        "pairing_failures_per_ip",
        "pairing_failures_per_device",
        "pairing_wrong_guesses_per_code",
        "oauth_register_per_ip_per_minute",
        "oauth_consent_per_ip_per_minute",
        "max_tokens_per_account",
        "max_devices_per_account",
    ),
    UNLIMITED,
)
# The stream's keep-alive comes every 50 ms so that reading /v1/sync stops promptly at its request timeout.
SERVER: dict[str, Any] = {"stream_keepalive_s": 0.05}
OPERATIONS = {endpoint.operation_id: endpoint for endpoint in endpoints(explicit_settings(**SERVER))}
REQUEST_TIMEOUT_S = 10.0
STREAM_READ_S = 0.2  # /v1/sync never ends: schemathesis keeps what arrives in this long
STATEFUL_STEPS = 10  # calls per sequence
STATEFUL_ATTEMPTS = 5
PATH_PARAM_MAX_CHARS = 128  # core/api/openapi.py documents every path parameter so


def negatable(endpoint: Endpoint) -> bool:
    """Whether a negative case exists: a parameter or a body to violate (the bearer header is ours)."""
    return bool("{" in endpoint.path or endpoint.extra.get("query") or endpoint.body or endpoint.body_doc)


CASES = [
    pytest.param(mode, operation_id, id=f"{mode.value}-{operation_id}")
    for operation_id, endpoint in sorted(OPERATIONS.items())
    for mode in GenerationMode
    if mode is GenerationMode.POSITIVE or negatable(endpoint)
]


class Session(requests.Session):
    """One connection pool for every call. Schemathesis reads an event stream until the request
    timeout's read half has passed in total, and gives the socket that same read timeout; the socket
    gets the full request timeout instead, for a busy server's headers."""

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs["timeout"] = REQUEST_TIMEOUT_S
        return super().request(method, url, *args, **kwargs)


@dataclass
class Api:
    """The served schema and the credentials the calls use."""

    base_url: str
    schema: OpenApiSchema
    session: Session
    device: str  # the phone's device credential
    sender: str  # a sender token with phone:control
    sender_id: str
    requests: int = 0  # every fuzzed request this module sent, for the summary line

    def fresh_phone(self) -> str:
        with httpx.Client(base_url=self.base_url) as http:
            return register_phone(http, app_build=1).token

    def spare_token_id(self) -> str:
        with httpx.Client(base_url=self.base_url) as http:
            response = http.post("/v1/tokens", json={"label": "spare"}, headers=self.auth("device"))
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def auth(self, kind: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.device if kind == 'device' else self.sender}"}


def load_schema(base_url: str) -> OpenApiSchema:
    config = schemathesis.Config.from_dict(
        {
            "base-url": base_url,
            "generation": {
                # The bearer header is set per operation below (a fuzzed one only ever gets the 401 the
                # authentication tests cover), so schemathesis neither generates nor negates it.
                "with-security-parameters": False,
            },
            "checks": {
                # Replaced by `schema_valid_request_accepted`: a semantic 400 the schema cannot express (a
                # reminder in the past, a byte limit) is this API's documented answer to schema-valid
                # data; a refusal of its shape is not.
                "positive_data_acceptance": {"enabled": False},
            },
            "operations": [
                {
                    # The send API takes each field's text spelling, in JSON too (a form carries only
                    # text: core/domain/notification.py), an empty value as absent and a priority in any
                    # case, and the Pushover shim passes its fields on to it: by design it accepts more
                    # than its JSON Schema says, so "schema-violating data is refused" does not hold
                    # there. Every other check does, and every other operation keeps this one.
                    "include-operation-id": ["send", "send_with_path_token", "post_message"],
                    "checks": {"negative_data_rejection": {"enabled": False}},
                }
            ],
        }
    )
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=config)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One server for the module, as the live_server fixture serves it (uvicorn on a loopback socket),
    on SQLite only: this suite is about the HTTP surface; each backend has suites of its own."""
    directory = tmp_path_factory.mktemp("fuzz")
    settings = explicit_settings(
        data_dir=directory / "data",
        database_url=f"sqlite:///{directory / 'relaybox.db'}",
        **SERVER,
        **LIMITS_RAISED,
    )
    # Fuzzed callback URLs name made-up hosts: they resolve through a table of none, never the DNS.
    core = build_core(settings, clock=ManualClock(), resolver=StaticResolver({}))
    try:
        with (
            serve_in_thread(create_app(core=core)) as url,
            httpx.Client(base_url=url) as http,
            Session() as session,
        ):
            phone = register_phone(http, app_build=1)
            pair_computer(http, phone)
            token = create_token(http, phone, scope="phone:control")
            yield Api(url, load_schema(url), session, phone.token, str(token["token"]), str(token["id"]))
    finally:
        core.engine.dispose()


def documented_codes(case: Case[Any], status: int) -> list[str] | None:
    """The error codes the document lists for ``status`` ("Error codes: a, b"), or None."""
    response = case.operation.definition.raw["responses"].get(str(status), {})
    description = str(response.get("description", ""))
    if not description.startswith("Error codes: "):
        return None
    return description.removeprefix("Error codes: ").split(", ")


def error_code(response: Response) -> str | None:
    """The catalogue code of any of the three error shapes: standard, flat (auth), Pushover shim."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        return str(error.get("code"))
    if isinstance(error, str):
        return error
    errors = body.get("errors")
    if isinstance(errors, list) and errors:
        return str(errors[0])
    return None


def documented_error_code(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """An error answer carries a code the document lists for that status."""
    codes = documented_codes(case, response.status_code)
    if response.status_code < 400 or codes is None:
        return None  # a success, or a status `status_code_conformance` already judges
    code = error_code(response)
    if code not in codes:
        raise AssertionError(
            f"{response.status_code} with code {code!r}, which the document does not list for it "
            f"(it lists {', '.join(codes)})"
        )
    return True


# What schema-valid data may still be refused with, because no JSON Schema can say it: each is a
# documented error code of its operation (``operation:code`` where it holds for one operation only).
# Everything else the server checks, the document states (patterns of ids and keys, enums, URL
# shape), so schema-valid data is never refused for its shape.
SEMANTIC_REFUSALS = {
    "fire_at_too_soon": "relative to the server's clock",
    "fire_at_too_far": "relative to the server's clock",
    "no_matching_device": "a device name the account must have",
    "answer_interaction:invalid_choice": "an index among the choices this question offered",
    "answer_interaction:choice_required": "a question with choices needs one, which the body cannot say",
    "answer_interaction:text_required": "a question without choices needs a typed reply",
    "answer_interaction:text_not_allowed": "only a question asked with allow_text takes a typed reply",
    "answer_interaction:text_too_long": "the question's own text_max_chars, counted once the text is opened",
    "answer_interaction:invalid_text": "a text sealed by this phone to the server's key for this question",
    "create_interaction:invalid_callback_url": "a URL's whole grammar (a host, no userinfo or fragment)",
    "create_interaction:callback_url_not_allowed": "a private or loopback host, unless allowed",
    "push_endpoint_not_allowed": "a web-push endpoint on a host that is not a push service's",
    "repeat_requires_urgent": "repeat and expire are taken with priority urgent only, a rule between fields",
    "invalid_expire": "expire is taken with repeat only, a rule between fields",
    "pair_confirm:invalid_public_key": "must be the key this phone registered (its shape is documented)",
    "post_envelope:invalid_blob": "the envelope's first byte must be the wire version",
    "invalid_chunk_layout": "chunk_size against size and the server's chunk limits",
    "transfer_too_large": "the server's configured size limit",
    "invalid_registration": "a challenge nonce only the server and the phone know",
    "message_too_long": "a limit in UTF-8 bytes; the schema counts characters",
    "invalid_delay": "a time 10 s to 3 days ahead of the server's clock, and delay or at, not both",
    "delay_unsupported": "a delivery time with priority urgent and repeat, a rule between fields",
    "too_many_scheduled": "the account's scheduled sends still waiting, which the body cannot say",
    "post_message:invalid_repeat": "priority 2 needs retry, a rule between fields",
    "post_message:invalid_sound": "sound none (silent) cannot go with priority 1 or 2",
    "post_message:invalid_body": "html and monospace cannot both be set",
    "post_message:invalid_callback_url": "a URL's whole grammar (a host, no userinfo or fragment)",
    "post_message:callback_url_not_allowed": "a private or loopback host, unless allowed",
    "title_too_long": "a limit in UTF-8 bytes; the schema counts characters",
}
REFUSING_STATUSES = (400, 413, 415, 422)


def carries_lone_surrogate(case: Case[Any]) -> bool:
    """JSON can carry half of a surrogate pair, which no UTF-8 text can: the server refuses such text
    with the field's own code, a rule JSON Schema cannot state."""

    def lone(value: Any) -> bool:
        if isinstance(value, str):
            return any(0xD800 <= ord(char) <= 0xDFFF for char in value)
        if isinstance(value, dict):
            return any(lone(key) or lone(item) for key, item in value.items())
        if isinstance(value, list):
            return any(lone(item) for item in value)
        return False

    return any(lone(part) for part in (case.body, case.query, case.path_parameters))


def schema_valid_request_accepted(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """Schema-valid data is never refused for its shape: the document and the server's validation
    agree (schemathesis' own positive_data_acceptance, which cannot tell a semantic refusal)."""
    if case.meta is None or not case.meta.generation.mode.is_positive or carries_lone_surrogate(case):
        return None
    if response.status_code not in REFUSING_STATUSES:
        return True
    code = error_code(response)
    operation = case.operation.definition.raw["operationId"]
    if code not in SEMANTIC_REFUSALS and f"{operation}:{code}" not in SEMANTIC_REFUSALS:
        raise AssertionError(f"schema-valid request refused with {code}: {response.content[:300]!r}")
    return True


CHECKS: list[Callable[[CheckContext, Response, Case[Any]], bool | None]] = [
    documented_error_code,
    schema_valid_request_accepted,
]


def credential_kinds(endpoint: Endpoint) -> list[str]:
    if endpoint.auth is None:
        return ["none"]
    kinds = []
    if Accept.DEVICE in endpoint.auth:
        kinds.append("device")
    if Accept.SENDER_TOKEN in endpoint.auth:
        kinds.append("sender")
    return kinds


def authenticate(api: Api, case: Case[Any], kind: str) -> dict[str, str]:
    """Put the credential where the operation takes it; returns the headers to send."""
    endpoint = OPERATIONS[case.operation.definition.raw["operationId"]]
    if endpoint.operation_id == "disconnect_my_device":
        return {"Authorization": f"Bearer {api.fresh_phone()}"}  # each call unpairs its own phone
    if (
        endpoint.operation_id == "revoke_token"
        and (case.path_parameters or {}).get("token_id") == api.sender_id
    ):
        # A sequence listed the tokens and picked the one every caller route uses: revoke a spare instead.
        case.path_parameters = {**(case.path_parameters or {}), "token_id": api.spare_token_id()}
    if kind == "device":
        return api.auth("device")
    if endpoint.auth_path_param:
        # Only over a schema-valid value: a negative case whose violation is this very parameter stays so.
        value = (case.path_parameters or {}).get(endpoint.auth_path_param)
        if isinstance(value, str) and 0 < len(value) <= PATH_PARAM_MAX_CHARS:
            case.path_parameters = {**(case.path_parameters or {}), endpoint.auth_path_param: api.sender}
        return {}
    if kind == "sender":
        return api.auth("sender")
    # The Pushover shim takes its token in the body or the query; replaced only where schema-valid.
    if isinstance(case.body, dict) and isinstance(case.body.get("token"), str):
        case.body = {**case.body, "token": api.sender}
    if isinstance(case.query, dict) and isinstance(case.query.get("token"), str):
        case.query = {**case.query, "token": api.sender}
    return {}


def call_kwargs(api: Api, case: Case[Any], kind: str) -> dict[str, Any]:
    """The transport arguments of one call: its credential, and a time limit for the endless stream."""
    stream = case.operation.definition.raw["operationId"] == "sync"
    return {
        "headers": authenticate(api, case, kind),
        "session": api.session,
        "timeout": STREAM_READ_S if stream else REQUEST_TIMEOUT_S,
    }


def call_and_validate(api: Api, case: Case[Any], kind: str) -> None:
    api.requests += 1
    case.call_and_validate(additional_checks=CHECKS, **call_kwargs(api, case, kind))


@pytest.mark.parametrize(("mode", "operation_id"), CASES)
def test_operation(api: Api, mode: GenerationMode, operation_id: str) -> None:
    operation = api.schema.find_operation_by_id(operation_id)

    @given(case=operation.as_strategy(mode), kind=st.sampled_from(credential_kinds(OPERATIONS[operation_id])))
    @hypothesis.settings(
        max_examples=fuzz_examples(),
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,  # each example is an HTTP request
            # Negative cases of a lone string parameter are mostly filtered (a number or a boolean
            # reaches the server as text that is valid again); what remains is still generated.
            HealthCheck.filter_too_much,
        ],
    )
    def fuzz(case: Case[Any], kind: str) -> None:
        call_and_validate(api, case, kind)

    fuzz()


def operations(schema: OpenApiSchema) -> Iterator[APIOperation[Any, Any, Any, Any]]:
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # an operation schemathesis cannot read
        yield result.ok()


def test_every_served_operation_is_fuzzed(api: Api) -> None:
    served = {operation.definition.raw["operationId"] for operation in operations(api.schema)}
    assert served == set(OPERATIONS)
    assert {operation_id for _, operation_id in (case.values for case in CASES)} == served


def test_stateful(api: Api, summary: Callable[[str], None]) -> None:
    """Call sequences along the links schemathesis infers (a created id into a later path)."""
    failures: list[Exception] = []
    scenarios: list[int] = []

    class Sequences(api.schema.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Case[Any]) -> dict[str, Any]:
            operation_id = case.operation.definition.raw["operationId"]
            if operation_id == "get_interaction":
                # A question created a step earlier is pending: any wait (20 s unless given) would be
                # spent in full, in real time. Long polling has its own tests (tests/core/api).
                case.query = {**(case.query or {}), "wait": 0}
            api.requests += 1
            return call_kwargs(api, case, credential_kinds(OPERATIONS[operation_id])[0])

        def step(self, input: Any) -> Any:
            try:
                return super().step(input)
            except Exception as error:
                failures.append(error)
                raise

        def validate_response(
            self, response: Response, case: Case[Any], additional_checks: Any = None, **kwargs: Any
        ) -> None:
            super().validate_response(response, case, additional_checks=CHECKS, **kwargs)

        def teardown(self) -> None:
            scenarios.append(1)

    budget = fuzz_examples()
    for _ in range(STATEFUL_ATTEMPTS):
        settings = hypothesis.settings(
            max_examples=budget - len(scenarios),
            stateful_step_count=STATEFUL_STEPS,
            deadline=None,
            database=None,
            # No shrinking: replaying a sequence against a server that kept the state of every other
            # one does not make it smaller, only different (schemathesis runs its machines so too).
            phases=[hypothesis.Phase.generate],
            suppress_health_check=[
                HealthCheck.too_slow,  # each step is an HTTP request
                HealthCheck.filter_too_much,  # as for the negative cases of test_operation
            ],
        )
        try:
            Sequences.run(settings=settings)
            break
        except hypothesis.errors.Flaky as error:
            # Hypothesis needs the same choices to draw the same calls, but which links a sequence may
            # follow depends on what the server answered, and the server keeps every earlier sequence's
            # state: a later draw can diverge (FlakyStrategyDefinition). That ends the run early and is
            # no finding unless a step failed (then that failure is the report); the rest of the budget
            # runs again.
            if failures:
                raise failures[0] from error
        if len(scenarios) >= budget:
            break
    assert scenarios, "no call sequence ran"
    # Runs last in this module (pytest keeps definition order): the count includes every test above.
    summary(
        f"fuzz: {len(OPERATIONS)} operations, {len(CASES)} cases and {len(scenarios)} call "
        f"sequences, {api.requests} requests: no 5xx, every response as documented"
    )
