"""The routes a phone uses for questions, urgent receipts, documents and attachments, with its
device credential."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from client.api import ApiError, RelayboxApi, without_none
from client.dispatch import one_line
from client.payload_fields import ID
from client.state import ClientError


@dataclass(frozen=True, slots=True)
class Answered:
    interaction_id: str
    status: str
    choice_index: int | None


@dataclass(frozen=True, slots=True)
class Acknowledged:
    receipt: str
    status: str  # acknowledged (by this device or another first), cancelled or expired


class PhoneApi(RelayboxApi):
    """The routes a phone uses for questions, urgent receipts, documents and attachments (device
    credential)."""

    def answer_interaction(
        self, interaction_id: str, choice_index: int | None, sealed_text: str | None = None
    ) -> Answered:
        """``POST /v1/interactions/{id}/answer`` with a choice, a sealed typed reply
        (``client.questions.sealed_text``) or both: 409 ``already_answered`` /
        ``interaction_expired``, 404 ``not_found`` and the 400s (``invalid_choice``,
        ``text_too_long``, …) become ``ApiError``."""
        path = f"/v1/interactions/{_path_segment(interaction_id)}/answer"
        raw = self._call("POST", path, body=without_none(choice_index=choice_index, sealed_text=sealed_text))
        fields = raw if isinstance(raw, dict) else {}
        status, index = fields.get("status"), fields.get("choice_index")
        if not isinstance(status, str) or not (index is None or isinstance(index, int)):
            raise ApiError(200, "invalid_response", "the answer's outcome lacks its status")
        return Answered(interaction_id, status, index)

    def acknowledge_receipt(self, receipt: str) -> Acknowledged:
        """``POST /v1/receipts/{id}/acknowledge``: the urgent notification stops repeating on every
        device. The first acknowledgement wins; one that comes later, or after a cancel or the
        expiry, is answered with the receipt's state. 404 ``receipt_not_found`` is an ``ApiError``."""
        raw = self._call("POST", f"/v1/receipts/{_path_segment(receipt)}/acknowledge")
        status = raw.get("status") if isinstance(raw, dict) else None
        if not isinstance(status, str):
            raise ApiError(200, "invalid_response", "the acknowledgement's outcome lacks its status")
        return Acknowledged(receipt, status)

    def pull_document(self, document_id: str) -> str:
        """``GET /v1/documents/{id}``: the document's envelope, base64; the server then forgets it."""
        raw = self._call("GET", f"/v1/documents/{_path_segment(document_id)}")
        blob = raw.get("blob") if isinstance(raw, dict) else None
        if not isinstance(blob, str):
            raise ApiError(200, "invalid_response", "the pulled document has no blob")
        return blob

    def pull_attachment(self, attachment_id: str) -> bytes:
        """``GET /v1/attachments/{id}``: a notification's attachment, still sealed (``secretbox-v1``)."""
        path = f"/v1/attachments/{_path_segment(attachment_id)}"
        return self._request("GET", path, body=None, auth=True, expect=200).content


def _path_segment(value: str) -> str:
    if not ID.fullmatch(value):
        raise ClientError("invalid_id", f"{one_line(value)!r} is not an id")
    return quote(value, safe="")
