"""One callback attempt: a POST to the receiver through the outbound policy
(``core.adapters.outbound``: https, every resolved address checked and the connection pinned to
it, no redirects, bounded time). The response body is not read (a failure's ``Retry-After`` is kept
for the retry's schedule). Every failure is an ``Outcome`` with a stable code, never an exception.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from core.adapters.outbound.client import OutboundClient, OutboundError
from core.domain.webhooks import retry_after_seconds

USER_AGENT = "relaybox-callbacks/1"
GONE = 410  # the receiver wants no more (Standard Webhooks): no retry


@dataclass(frozen=True)
class Outcome:
    """What one attempt came to: ``error`` None is a 2xx (delivered)."""

    error: str | None
    status: int | None = None  # the receiver's HTTP status, when it answered
    final: bool = False  # retrying cannot help (410 Gone)
    retry_after_s: int | None = None  # the receiver's Retry-After, in seconds from its answer


DELIVERED = Outcome(None)


class WebhookPoster:
    def __init__(self, outbound: OutboundClient) -> None:
        self.outbound = outbound

    async def post(self, url: str, headers: dict[str, str], body: bytes) -> Outcome:
        """POST ``body`` to ``url`` with ``headers`` (JSON unless they name another Content-Type);
        the outcome, within the client's time."""
        sent = {"Content-Type": "application/json", **headers}
        try:
            answer = await self.outbound.request("POST", url, headers=sent, content=body)
        except OutboundError as refused:
            return Outcome(refused.code)
        status = answer.status
        if 200 <= status < 300:
            return Outcome(None, status)
        if 300 <= status < 400:
            return Outcome("redirect_not_followed", status)
        if status == GONE:
            return Outcome("gone", status, final=True)
        retry_after = retry_after_seconds(answer.headers.get("retry-after"), time.time())
        return Outcome("http_error", status, retry_after_s=retry_after)
