"""``repeat`` and ``expire`` of a send (pure): any value a JSON body, a form or a query string can
carry either parses within its bounds or is refused with one of the three codes; and the exact
bytes of the payloads an urgent send and its stop put in front of a phone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from core.domain import payloads
from core.domain.notification import PRIORITIES, InvalidFieldError, Notification
from core.domain.urgent import (
    EXPIRE_DEFAULT_S,
    EXPIRE_MAX_S,
    EXPIRE_MIN_S,
    REPEAT_MAX_S,
    Repeat,
    UrgentReceipt,
    parse_repeat,
)

VALUES = st.one_of(
    st.none(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.integers(0, 20_000).map(str),
    st.lists(st.integers(), max_size=2),
)


@given(repeat=VALUES, expire=VALUES, priority=st.sampled_from(PRIORITIES), floor=st.integers(1, 30))
@example(repeat="60", expire=" 600 ", priority="urgent", floor=30)
@example(repeat=60.0, expire=None, priority="urgent", floor=30)
@example(repeat=1, expire="", priority="urgent", floor=1)
def test_repeat_and_expire_parse_within_bounds_or_are_refused(
    repeat: Any, expire: Any, priority: str, floor: int
) -> None:
    fields = {"repeat": repeat, "expire": expire}
    code = None
    try:
        parsed = parse_repeat(fields, priority, min_repeat_s=floor)
    except InvalidFieldError as error:
        code = error.code
    if code is not None:
        assert code in ("repeat_requires_urgent", "invalid_repeat", "invalid_expire")
        assert priority == "urgent" or code == "repeat_requires_urgent"
        return
    if parsed is None:
        assert repeat in (None, "") and expire in (None, "")
        return
    assert priority == "urgent"
    assert floor <= parsed.every_s <= REPEAT_MAX_S
    assert EXPIRE_MIN_S <= parsed.expire_s <= EXPIRE_MAX_S
    assert expire not in (None, "") or parsed.expire_s == EXPIRE_DEFAULT_S


def test_the_operators_floor_is_the_floor() -> None:
    assert parse_repeat({"repeat": 5}, "urgent", min_repeat_s=5) == Repeat(5, EXPIRE_DEFAULT_S)
    with pytest.raises(InvalidFieldError) as refused:
        parse_repeat({"repeat": 5}, "urgent")
    assert (refused.value.code, refused.value.details) == ("invalid_repeat", {"min": 30, "max": REPEAT_MAX_S})


def test_the_payloads_of_an_urgent_send_and_its_stop_byte_for_byte() -> None:
    note = Notification("prod is down", title="PagerDuty", priority="urgent", tags=("db",))
    urgent = UrgentReceipt("rcp_" + "a" * 32, 60, 1_800_003_600)
    encoded = payloads.encode(
        payloads.notification(note, msg_id="msg_1", sent_at=1_800_000_000, sender="tok_1", urgent=urgent)
    )
    assert encoded == (
        b'{"type":"notification","id":"msg_1","sent_at":1800000000,"sequence_id":"tok_1:msg_1",'
        b'"title":"PagerDuty",'
        b'"message":"prod is down","priority":"urgent","receipt":"rcp_' + b"a" * 32 + b'","repeat":60,'
        b'"expire_at":1800003600,"tags":["db"]}'
    )
    stop = payloads.encode(payloads.urgent_stop(receipt_id="rcp_1", reason="cancelled"))
    assert stop == b'{"type":"urgent_stop","receipt":"rcp_1","reason":"cancelled"}'
