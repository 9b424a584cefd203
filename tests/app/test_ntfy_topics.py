"""ntfy's ``/{topic}`` comes last and takes any path nothing else serves, but for relaybox's own
first path segments (``RESERVED_TOPICS``), which keep their answers; that list is in step with the
app's routes."""

from __future__ import annotations

from starlette.routing import BaseRoute, Mount, Route
from starlette.testclient import TestClient

from core.api import COMPAT_ENDPOINTS
from core.api.ntfy import RESERVED_TOPICS, TOPIC


def first_segments(routes: list[BaseRoute]) -> set[str]:
    segments = set()
    for route in routes:
        if isinstance(route, Route | Mount):
            first = route.path.lstrip("/").split("/", 1)[0]
            if first and not first.startswith("{"):
                segments.add(first)
    return segments


def test_every_first_segment_relaybox_serves_is_a_reserved_topic(client: TestClient) -> None:
    ntfy = {endpoint.path for endpoint in COMPAT_ENDPOINTS if endpoint.tag == "ntfy"}
    own = [route for route in client.app.routes if getattr(route, "path", None) not in ntfy]  # type: ignore[attr-defined]
    could_be_topics = {segment for segment in first_segments(own) if TOPIC.fullmatch(segment)}
    assert could_be_topics, "the app serves paths of its own"
    assert could_be_topics <= RESERVED_TOPICS, sorted(could_be_topics - RESERVED_TOPICS)
