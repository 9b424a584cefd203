"""Prometheus metrics at ``/metrics``, on a registry of the app's own (tests build many apps).

- ``relaybox_requests_total{route,method,status}`` and ``relaybox_request_seconds{route,method}``:
  ``route`` is the route template (``/v1/send/{token}``), never the requested path, which may
  hold a token; a request that matched no route is ``unmatched``. A stream's or long poll's
  duration is its whole response.
- ``relaybox_pushes_total{outcome}``: pushes handed to the push router, by outcome.
- ``relaybox_open_streams``, ``relaybox_waiting_polls``: on this process, now.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Scope

from core.runtime.core import Core

METRICS_PATH = "/metrics"
UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class CoreCollector(Collector):
    """Read from the Core at scrape time: push outcomes, open streams, waiting polls."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def collect(self) -> Iterable[Metric]:
        pushes = CounterMetricFamily(
            "relaybox_pushes", "Pushes handed to the push router, by outcome", labels=["outcome"]
        )
        for outcome, count in sorted(self.core.push.outcomes.items()):
            pushes.add_metric([outcome], count)
        yield pushes
        yield GaugeMetricFamily(
            "relaybox_open_streams",
            "Open /v1/sync streams on this process",
            value=self.core.presence.open_streams,
        )
        yield GaugeMetricFamily(
            "relaybox_waiting_polls",
            "Long polls waiting for an answer on this process",
            value=self.core.waits.long_polls,
        )


class Metrics:
    def __init__(self, core: Core) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "relaybox_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "relaybox_request_seconds",
            "Time to the end of the response, by route template and method",
            ["route", "method"],
            registry=self.registry,
        )
        self.registry.register(CoreCollector(core))
        # The labelled children, looked up once: ``labels()`` costs more than the update itself.
        # Keys are route templates, known methods and statuses, never paths: a small set.
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        method = method if method in METHODS else "other"
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(route, method, str(status)), self.seconds.labels(route, method))
            if len(self._children) < 10_000:
                self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def route(self) -> Route:
        async def metrics(_request: Request) -> Response:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

        return Route(METRICS_PATH, metrics, methods=["GET"], include_in_schema=False)


def template(scope: Scope, root: str) -> str:
    """The matched route's path template with the prefixes of the mounts it is in, from what the
    router wrote into the scope (``route`` and ``root_path``; mount prefixes here are fixed)."""
    route: BaseRoute | None = scope.get("route")
    prefix = str(scope.get("root_path", ""))[len(root) :]
    if isinstance(route, Route):
        return prefix + route.path
    if isinstance(route, Mount) and not route.routes:  # a mounted app: its own paths are its business
        return prefix
    return UNMATCHED  # nothing matched, or nothing inside a mount of routes did
