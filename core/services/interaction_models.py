"""What questions to the phone take and give on the wire: the caller's question, the phone's
answer and the interaction both see (``core.services.interactions`` holds the operations)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StringConstraints, model_validator
from pydantic.config import JsonDict

from core.domain.outbound import MAX_URL_BYTES
from core.services.limits import Limited
from core.services.relay import BLOB_SCHEMA
from core.services.typed_replies import TEXT_DEFAULT_MAX_CHARS, TEXT_MAX_CHARS

Status = Literal["pending", "answered", "expired"]
CallbackState = Literal["pending", "delivered", "failed"]
Choice = Annotated[str, StringConstraints(min_length=1, max_length=48)]
# What no property alone can say: 2-4 choices, or none when a typed reply is allowed (it is then the
# whole answer); text_max_chars only with allow_text.
REPLY_SHAPES: JsonDict = {
    "anyOf": [
        {
            "required": ["allow_text"],
            "properties": {
                "allow_text": {"const": True},
                "choices": {"anyOf": [{"maxItems": 0}, {"minItems": 2}]},
            },
        },
        {
            "properties": {
                "allow_text": {"const": False},
                "choices": {"minItems": 2},
                "text_max_chars": False,
            }
        },
    ]
}


class InteractionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=REPLY_SHAPES)
    question: str = Field(min_length=1, max_length=1000)
    choices: list[Choice] = Field(
        default=["Approve", "Deny"],
        max_length=4,
        description="2-4 button labels; [] with allow_text asks for a typed reply alone",
    )
    allow_text: StrictBool = Field(
        default=False,
        description="The phone may type a reply beside the choice (say, a reason for a denial)",
    )
    text_max_chars: StrictInt = Field(
        default=TEXT_DEFAULT_MAX_CHARS,
        ge=1,
        le=TEXT_MAX_CHARS,
        description="With allow_text: the most characters the typed reply may have",
    )
    expires_in_seconds: StrictInt = Field(default=600, ge=60, le=86_400)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=128)
    callback_url: str | None = Field(
        default=None,
        description="An https URL told of the answer or the expiry by a signed POST (Standard Webhooks; "
        "docs/protocol.md), for a caller that cannot wait: CI, cron, serverless. Its host must be public "
        "unless the server allows private targets",
        # Checked by the operation, for the codes invalid_callback_url and callback_url_not_allowed.
        json_schema_extra={"maxLength": MAX_URL_BYTES, "pattern": "^https://[!-~]+$"},
    )

    @model_validator(mode="after")
    def _reply_shape(self) -> InteractionCreate:
        if not self.allow_text and "text_max_chars" in self.model_fields_set:
            raise ValueError("text_max_chars needs allow_text: true")
        if len(self.choices) == 1 or (not self.choices and not self.allow_text):
            raise ValueError("choices must be 2-4 labels, or [] with allow_text: true")
        return self

    @property
    def text_limit(self) -> int | None:
        """The typed reply's limit, or None when the question takes none."""
        return self.text_max_chars if self.allow_text else None


class CallbackStatus(BaseModel):
    state: CallbackState = Field(description="delivered on a 2xx; failed once the retries ran out")
    attempts: int
    last_error: str | None = Field(
        default=None,
        description="Why the last attempt failed: address_not_allowed, dns_failed, timeout, connect_failed, "
        "tls_failed, redirect_not_followed, http_error or gone",
    )
    last_status: int | None = Field(default=None, description="The receiver's last HTTP status")


class InteractionOut(Limited):
    id: str
    status: Status
    created: bool | None = Field(
        default=None,
        description="On the create response only: true for a new question, false when it answers a "
        "duplicate request (no second prompt); reads and callbacks leave it out",
    )
    expires_at: int
    choice_index: int | None = Field(default=None, description="Index into the caller's own choices")
    answered_at: int | None = None
    text: str | None = Field(
        default=None,
        description="The phone's typed reply, in the first read after the answer only: it is not kept",
    )
    text_already_read: bool | None = Field(
        default=None, description="True when an earlier read took the typed reply (it is gone)"
    )
    text_waiting: bool = Field(default=False, exclude=True)  # a typed reply waits for its first read
    callback_secret: str | None = Field(
        default=None,
        description="With callback_url, on the create response only (201, and the duplicate's 200): the "
        "whsec_ secret that signs this question's callbacks",
    )
    callback: CallbackStatus | None = Field(
        default=None, description="With callback_url, on reads: how the callback's delivery stands"
    )


class CallbackEvent(BaseModel):
    """The body POSTed to a callback_url, signed with the webhook-id, webhook-timestamp and
    webhook-signature headers (Standard Webhooks)."""

    type: Literal["interaction.answered", "interaction.expired"]
    timestamp: str = Field(description="When it was answered or expired, ISO 8601 in UTC")
    data: InteractionOut = Field(
        description="The interaction as GET returns it (without callback); the typed reply's text is in "
        "it unless a read took it first, and a 2xx to this POST is its first read"
    )


class Answer(BaseModel):
    """The phone's answer: a choice, a typed reply sealed to the server's key, or both, as the
    question allows."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"required": ["choice_index"], "properties": {"choice_index": {"type": "integer"}}},
                {"required": ["sealed_text"], "properties": {"sealed_text": {"type": "string"}}},
            ]
        },
    )
    choice_index: StrictInt | None = Field(default=None, ge=0, le=3)
    sealed_text: str | None = Field(
        default=None,
        description="Standard base64 of an envelope v1 from the phone to the server's key holding an "
        "interaction_text payload (docs/protocol.md); its text is held to the question's text_max_chars "
        "once opened, so no length is stated here",
        json_schema_extra=BLOB_SCHEMA,
    )

    @model_validator(mode="after")
    def _something(self) -> Answer:
        if self.choice_index is None and self.sealed_text is None:
            raise ValueError("send choice_index, sealed_text or both")
        return self
