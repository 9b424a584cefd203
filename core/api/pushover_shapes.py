"""The Pushover shim's documented shapes, for the OpenAPI document: its request bodies and its
answers (``status: 1`` or ``status: 0`` with ``errors``) in Pushover's own form. The handlers in
``core.api.pushover`` read the fields themselves, as leniently as Pushover does."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from core.domain.notification import DEVICE_SELECTOR_SCHEMA, TIMESTAMP_MAX, URL_SCHEMA
from core.services import attachments


class ShimOk(BaseModel):
    status: int = Field(description="1")
    request: str
    receipt: str | SkipJsonSchema[None] = Field(
        default=None, description="priority 2: poll it at GET /v1/receipts/{receipt}.json"
    )


class ShimError(BaseModel):
    status: int = Field(description="0")
    errors: list[str]
    request: str


IGNORED = Field(default=None, description="Accepted for Pushover compatibility and ignored")


ATTACHMENT_BASE64_SCHEMA: JsonDict = {
    "pattern": "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$"
}
MIME_TYPE_SCHEMA: JsonDict = {
    "pattern": "^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$",
    "maxLength": attachments.MIME_TYPE_MAX_CHARS,
}


def _attachment_rules(schema: JsonDict) -> None:
    """A file (``attachment``) comes only as a multipart part."""
    properties = schema.get("properties")
    if isinstance(properties, dict):
        properties["attachment"] = False


class MessageRequest(BaseModel):
    model_config = ConfigDict(json_schema_extra=lambda schema: _attachment_rules(schema))
    token: str
    message: str = Field(min_length=1)
    user: Any = IGNORED
    # Optional fields are documented without null: a form cannot carry one (null in JSON is absent).
    title: str | SkipJsonSchema[None] = Field(
        default=None, min_length=1, max_length=25, description="1-100 bytes of UTF-8 (25 characters fit)"
    )
    priority: Annotated[int, Field(ge=-2, le=2)] | SkipJsonSchema[None] = Field(
        default=None,
        description="-2 min, -1 low, 0 default, 1 high, 2 urgent until acknowledged (needs retry and "
        "expire; answers a receipt)",
    )
    retry: Annotated[int, Field(ge=30, le=3600)] | SkipJsonSchema[None] = Field(
        default=None, description="priority 2: alert again every this many seconds"
    )
    expire: Annotated[int, Field(ge=60, le=10800)] | SkipJsonSchema[None] = Field(
        default=None, description="priority 2: stop alerting after this many seconds"
    )
    callback: str | SkipJsonSchema[None] = Field(
        default=None,
        description="priority 2: an https URL POSTed (form) once a device acknowledges",
        json_schema_extra={"pattern": "^https://", "maxLength": 2048},
    )
    html: Annotated[int, Field(ge=0, le=1)] | SkipJsonSchema[None] = Field(
        default=None, description="1: the message is Pushover's HTML subset (shown as Markdown)"
    )
    monospace: Annotated[int, Field(ge=0, le=1)] | SkipJsonSchema[None] = Field(
        default=None, description="1: the message is shown in a monospace block (not with html)"
    )
    sound: Literal["pushover", "none"] | SkipJsonSchema[None] = Field(
        default=None, description="As GET /v1/sounds.json lists: the phone's own sound, or none (silent)"
    )
    timestamp: Annotated[int, Field(ge=1, le=TIMESTAMP_MAX)] | SkipJsonSchema[None] = Field(
        default=None, description="Unix time shown as the message's time"
    )
    url: str | SkipJsonSchema[None] = Field(default=None, json_schema_extra=URL_SCHEMA)
    url_title: str | SkipJsonSchema[None] = Field(
        default=None, min_length=1, max_length=25, description="1-100 bytes of UTF-8"
    )
    device: str | SkipJsonSchema[None] = Field(
        default=None,
        description="Comma list of device names; none, empty or ALL_DEVICES: every device",
        json_schema_extra=DEVICE_SELECTOR_SCHEMA,
    )
    ttl: int | SkipJsonSchema[None] = Field(default=None, description="seconds; clamped to 0-259200")
    attachment_base64: str | SkipJsonSchema[None] = Field(
        default=None,
        description="An image, standard base64, up to 5 MB (or an `attachment` file part)",
        json_schema_extra=ATTACHMENT_BASE64_SCHEMA,
    )
    attachment_type: str | SkipJsonSchema[None] = Field(
        default=None,
        description="The attachment's MIME type, e.g. image/jpeg (sniffed from the bytes when absent)",
        json_schema_extra=MIME_TYPE_SCHEMA,
    )


class ValidateRequest(BaseModel):
    token: str
    user: Any = IGNORED
    device: Any = IGNORED
