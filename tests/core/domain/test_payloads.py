"""Server-composed payloads whose bytes are pinned here (field order is part of the contract)."""

from __future__ import annotations

from core.domain import payloads


def test_interaction_closed_has_its_documented_field_order_and_omits_a_missing_choice() -> None:
    closed = payloads.interaction_closed(
        interaction_id="int_1", answered_by="dev_1", answered_by_name="Pixel", choice_index=0, at=5
    )
    assert payloads.encode(closed) == (
        b'{"type":"interaction_closed","id":"int_1","reason":"answered",'
        b'"answered_by":{"device_id":"dev_1","name":"Pixel"},"choice_index":0,"at":5}'
    )
    typed_only = payloads.interaction_closed(
        interaction_id="int_1", answered_by="dev_1", answered_by_name="Pixel", choice_index=None, at=5
    )
    assert "choice_index" not in typed_only
