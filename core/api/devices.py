"""Device routes: a phone registers; a device reads, updates, proves and removes itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.responses import JSONResponse, Response

from core.api.routing import Call, Endpoint
from core.services import device_list, devices, push_registration, signup
from core.services.auth import Accept


async def register_device(call: Call) -> BaseModel:
    return await call.core.run(
        devices.register_phone, call.principal, body=call.body_as(devices.DeviceCreate)
    )


async def get_my_device(call: Call) -> BaseModel:
    return await call.core.run(devices.get_own_device, call.principal)


async def update_my_device(call: Call) -> BaseModel:
    return await call.core.run(devices.update_device, call.principal, body=call.body_as(devices.DevicePatch))


async def verify_push_registration(call: Call) -> BaseModel:
    body = call.body_as(push_registration.RegistrationProof)
    return await call.core.run(devices.verify_push_registration, call.principal, body=body)


async def report_my_status(call: Call) -> Response:
    result = await call.core.run(
        devices.report_status, call.principal, body=call.body_as(devices.StatusReport)
    )
    if not result.accepted:
        return Response(status_code=204)  # within 60 s of the last accepted report: dropped
    return JSONResponse(result.model_dump(mode="json"), status_code=202)


async def disconnect_my_device(call: Call) -> None:
    await call.core.run(devices.disconnect_device, call.principal)


ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/devices",
        register_device,
        "Register a phone (creates its account)",
        auth=None,
        body=devices.DeviceCreate,
        response=devices.DeviceRegistered,
        status=201,
        errors=(
            "invalid_public_key",
            "unsupported_push_service",
            "push_endpoint_not_allowed",
            "registration_closed",
            "invalid_invite",
            "rate_limit_exceeded",
        ),
        tag="devices",
    ),
    Endpoint(
        "GET",
        "/v1/devices/me",
        get_my_device,
        "The calling device",
        auth=Accept.DEVICE,
        response=devices.DeviceOut,
        tag="devices",
    ),
    Endpoint(
        "PATCH",
        "/v1/devices/me",
        update_my_device,
        "Update name, app build or push registration",
        auth=Accept.DEVICE,
        body=devices.DevicePatch,
        response=devices.DeviceOut,
        errors=("unsupported_push_service", "push_endpoint_not_allowed"),
        tag="devices",
    ),
    Endpoint(
        "POST",
        "/v1/devices/me/push-registration",
        verify_push_registration,
        "Echo a reg_challenge to prove an FCM registration",
        auth=Accept.DEVICE,
        body=push_registration.RegistrationProof,
        response=devices.DeviceOut,
        errors=("invalid_registration",),
        tag="devices",
    ),
    Endpoint(
        "POST",
        "/v1/devices/me/status",
        report_my_status,
        "Report battery, charging, ringer and network (one accepted per 60 s; extras get 204)",
        auth=Accept.DEVICE,
        body=devices.StatusReport,
        response=devices.StatusAccepted,
        status=202,
        tag="devices",
        extra={"also": {204: "Dropped: a report was accepted less than 60 s ago"}},
    ),
    Endpoint(
        "DELETE",
        "/v1/devices/me",
        disconnect_my_device,
        "Disconnect: unpair and drop keys, credential and push registration",
        auth=Accept.DEVICE,
        status=204,
        tag="devices",
    ),
]


async def list_my_devices(call: Call) -> BaseModel:
    return await call.core.run(device_list.list_devices, call.principal)


async def create_invite(call: Call) -> BaseModel:
    return await call.core.run(signup.create_invite, call.principal)


ENDPOINTS.append(
    Endpoint(
        "POST",
        "/v1/invites",
        create_invite,
        "Invite one more phone onto this server (a phone's credential; single use, 24 hours)",
        auth=Accept.DEVICE,
        response=signup.InviteOut,
        status=201,
        description="Where registration is by invite, a phone registers with `POST /v1/devices` only with "
        "an invite (`invite`), once the server's first phone claimed it. At most 20 of an account's "
        "invites are live at once.",
        errors=("not_a_phone", "registration_closed", "limit_reached"),
        tag="devices",
    )
)
ENDPOINTS.append(
    Endpoint(
        "GET",
        "/v1/devices",
        list_my_devices,
        "The account's devices and whether each is reachable",
        auth=Accept.SENDER_TOKEN | Accept.DEVICE,
        response=device_list.DeviceList,
        errors=("insufficient_scope",),
        tag="devices",
    )
)


def document_push_registrations(document: dict[str, Any], services: Mapping[str, type[BaseModel]]) -> None:
    """State in ``document`` what ``push_registrations`` takes on this server: by name, the
    registration of each configured push service (``PushRouter.registrations``), as its model
    validates it, and nothing else; the request model alone allows any object."""
    refs, schema = models_json_schema(
        [(model, "validation") for model in services.values()], ref_template="#/components/schemas/{model}"
    )
    components = document["components"]["schemas"]
    for name, definition in schema.get("$defs", {}).items():
        if components.setdefault(name, definition) != definition:
            raise ValueError(f"a push registration model is named {name!r}, as another schema of the API")
    name = push_registration.PushRegistrations.__name__
    components[name] = {
        "title": name,
        "description": components[name]["description"],
        "type": "object",
        "properties": {service: refs[(model, "validation")] for service, model in services.items()},
        "additionalProperties": False,
    }
