"""``app.metrics.Requests`` counts responses on plain numbers: its exposition must be what
prometheus_client's own ``Counter`` and ``Histogram`` give for the same responses."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from app.metrics import Requests

RESPONSES = [
    ("/mcp", "POST", 200, 0.0008),
    ("/mcp", "POST", 200, 0.005),  # on a bucket's bound: counted in it (le)
    ("/mcp", "POST", 401, 0.0051),
    ("/v1/send/{token}", "POST", 200, 0.3),
    ("unmatched", "BREW", 404, 0.0),  # an unknown method is "other"
    ("unmatched", "GET", 404, 12.0),  # past the last finite bound: +Inf only
    ("/v1/sync", "GET", 200, 7.5),
]


def _created_times_aside(text: bytes) -> str:
    return re.sub(r"^(\w+_created\{.*\}) \S+$", r"\1 T", text.decode(), flags=re.MULTILINE)


def test_the_exposition_is_prometheus_clients_own() -> None:
    ours = CollectorRegistry()
    requests = Requests()
    ours.register(requests)
    theirs = CollectorRegistry()
    counter = Counter(
        "relaybox_requests",
        "HTTP requests by route template, method and status",
        ["route", "method", "status"],
        registry=theirs,
    )
    histogram = Histogram(
        "relaybox_request_seconds",
        "Time to the end of the response, by route template and method",
        ["route", "method"],
        registry=theirs,
    )
    for route, method, status, seconds in RESPONSES:
        requests.observe(route, method, status, seconds)
        shown = method if method != "BREW" else "other"
        counter.labels(route, shown, str(status)).inc()
        histogram.labels(route, shown).observe(seconds)
    expected = _created_times_aside(generate_latest(theirs))
    assert _created_times_aside(generate_latest(ours)) == expected
    assert 'relaybox_request_seconds_bucket{le="0.005",method="POST",route="/mcp"} 2.0' in expected
