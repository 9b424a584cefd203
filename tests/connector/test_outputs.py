"""The list_devices view of the core's device summaries: made once per set of kept summaries, made afresh
when a summary is new (a device changed, or an open stream made it reachable), and bounded."""

from __future__ import annotations

import pytest

from connector import outputs
from core.services.device_list import DeviceSummary


def summary(name: str = "Pixel", *, reachable: bool = False) -> DeviceSummary:
    return DeviceSummary(
        device_id="dev-1", name=name, surface_kind="phone", reachable=reachable, last_seen_at=7200
    )


def test_the_same_kept_summaries_get_the_view_made_of_them() -> None:
    kept = (summary(),)
    first = outputs.device_listing(list(kept))
    again = outputs.device_listing(list(kept))
    assert again is first
    assert first.model_dump() == {
        "devices": [
            {
                "device_id": "dev-1",
                "name": "Pixel",
                "surface_kind": "phone",
                "reachable": False,
                "status_reported_at": None,
                "last_seen_at": 7200,
                "battery_percent": None,
                "charging": None,
            }
        ]
    }


def test_new_summaries_get_a_view_of_their_own() -> None:
    before = outputs.device_listing([summary()])
    renamed = outputs.device_listing([summary("Pixel 9")])
    streaming = outputs.device_listing([summary(reachable=True)])
    assert [d.name for d in before.devices] == ["Pixel"]
    assert [d.name for d in renamed.devices] == ["Pixel 9"]
    assert [d.reachable for d in streaming.devices] == [True]


def test_views_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outputs, "MAX_LISTINGS", 3)
    monkeypatch.setattr(outputs, "_listings", {})
    kept = [(summary(f"phone {n}"),) for n in range(5)]
    views = [outputs.device_listing(list(k)) for k in kept]
    assert len(outputs._listings) == 3
    assert outputs.device_listing(list(kept[4])) is views[4]  # the newest stay
    assert outputs.device_listing(list(kept[0])) is not views[0]  # the oldest went
