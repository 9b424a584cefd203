"""One callback attempt: a POST to the receiver, guarded against server-side request forgery.

The receiver's host is resolved (``Resolver``) and every address it gives must pass
``address_allowed``; the connection then goes to the address that was checked, so a second DNS
answer cannot move it, with the URL's own host as the TLS server name (SNI and certificate check)
and as the Host header. Redirects are not followed, the response body is not read (a failure's
``Retry-After`` is kept for the retry's schedule), and the whole attempt, resolving included, has
``timeout_s``. Every failure is an ``Outcome`` with a stable
code, never an exception.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx

from core.adapters.webhooks.resolver import Resolver
from core.domain.webhooks import IPAddress, address_allowed, parse_address, retry_after_seconds

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
    def __init__(
        self,
        resolver: Resolver,
        *,
        allow_private: bool,
        ca_file: Path | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.resolver = resolver
        self.allow_private = allow_private
        self.timeout_s = timeout_s
        self._tls = httpx.create_ssl_context(trust_env=False)  # certifi's CAs, whatever SSL_CERT_FILE says
        if ca_file is not None:
            self._tls.load_verify_locations(cafile=str(ca_file))

    async def post(self, url: str, headers: dict[str, str], body: bytes) -> Outcome:
        """POST ``body`` to ``url`` with ``headers`` (JSON unless they name another Content-Type);
        the outcome, within ``timeout_s``."""
        try:
            with anyio.fail_after(self.timeout_s):
                return await self._post(url, headers, body)
        except TimeoutError:
            return Outcome("timeout")

    async def vetted_address(self, host: str, port: int) -> IPAddress | Outcome:
        """The address to connect to for ``host``: the first it resolves to, if every one of them
        may be reached (one private address among public ones refuses the name)."""
        try:
            addresses = [parse_address(text) for text in await self.resolver.addresses(host, port)]
        except (OSError, ValueError):  # no address, or not one
            return Outcome("dns_failed")
        if not addresses or not all(address_allowed(a, allow_private=self.allow_private) for a in addresses):
            return Outcome("address_not_allowed")
        return addresses[0]

    async def _post(self, url: str, headers: dict[str, str], body: bytes) -> Outcome:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or 443
        address = await self.vetted_address(host, port)
        if isinstance(address, Outcome):
            return address
        pinned = f"[{address}]" if address.version == 6 else str(address)
        target = f"https://{pinned}:{port}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")
        sent = {"Content-Type": "application/json", **headers, "Host": parts.netloc, "User-Agent": USER_AGENT}
        try:
            async with (
                httpx.AsyncClient(
                    verify=self._tls, trust_env=False, follow_redirects=False, timeout=self.timeout_s
                ) as http,
                http.stream(
                    "POST", target, headers=sent, content=body, extensions={"sni_hostname": host}
                ) as response,
            ):
                status = response.status_code  # the body is never read
                retry_after = retry_after_seconds(response.headers.get("retry-after"), time.time())
        except httpx.TimeoutException:
            return Outcome("timeout")
        except (httpx.HTTPError, OSError) as error:
            return Outcome("tls_failed" if _is_tls(error) else "connect_failed")
        if 200 <= status < 300:
            return Outcome(None, status)
        if 300 <= status < 400:
            return Outcome("redirect_not_followed", status)
        if status == GONE:
            return Outcome("gone", status, final=True)
        return Outcome("http_error", status, retry_after_s=retry_after)


def _is_tls(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is a TLS failure: an untrusted or mismatched
    certificate, a handshake the receiver refused."""
    seen: BaseException | None = error
    for _ in range(8):  # a chain is short; never follow one for ever
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
