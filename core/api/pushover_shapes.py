"""The Pushover shim's documented shapes, for the OpenAPI document: its request bodies and its
answers (``status: 1`` or ``status: 0`` with ``errors``) in Pushover's own form. The handlers in
``core.api.pushover`` read the fields themselves, as leniently as Pushover does."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from core.domain.notification import DEVICE_SELECTOR_SCHEMA, URL_SCHEMA
from core.services import attachments


class ShimOk(BaseModel):
    status: int = Field(description="1")
    request: str


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
    """Base64 needs its type; a file (``attachment``) comes only as a multipart part."""
    schema["dependentRequired"] = {"attachment_base64": ["attachment_type"]}
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
    priority: Annotated[int, Field(ge=-2, le=1)] | SkipJsonSchema[None] = Field(
        default=None, description="-2 to 1; 2 (emergency) is refused with priority_emergency_unsupported"
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
        description="The attachment's MIME type, e.g. image/jpeg",
        json_schema_extra=MIME_TYPE_SCHEMA,
    )
    sound: Any = IGNORED
    timestamp: Any = IGNORED


class ValidateRequest(BaseModel):
    token: str
    user: Any = IGNORED
    device: Any = IGNORED
