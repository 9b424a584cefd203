"""Every request the server makes to a URL someone else chose, made one way: a browser's web-push
endpoint (``core.adapters.push.webpush``), a question's answer callback
(``core.adapters.webhooks.poster``), an OAuth client's metadata document
(``oauth.client_metadata``).

Before anything is sent, the URL is held to ``core.domain.outbound``: https and well formed, and
for a purpose that keeps to a list of hosts (web push), one of those. The host is resolved and
every address it gives must be allowed (one private address among public ones refuses the name);
the connection then goes to the address that was checked, so a second DNS answer cannot move it,
with the URL's own host as the TLS server name (SNI and certificate check) and as the Host header.
Redirects are never followed (a 3xx is the answer), proxies from the environment are not used, at
most ``read_limit`` bytes of a body are read, and the whole request, resolving included, has
``timeout_s``. A request that cannot be made raises ``OutboundError`` with a stable code.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpx

from core.adapters.outbound.reach import Reach
from core.adapters.outbound.resolver import Resolver
from core.domain.outbound import IPAddress, address_allowed, parse_address

MAX_KEPT_HOSTS = 32  # with keep_alive: hosts whose connections are kept (any further host: none)


class OutboundError(Exception):
    """The request was not made, or not to the end: ``code`` says why (``url_not_allowed``,
    ``dns_failed``, ``address_not_allowed``, ``timeout``, ``tls_failed``, ``connect_failed``,
    ``body_too_large``)."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes  # at most the request's read_limit; empty when it was 0


class OutboundClient:
    """Requests for one purpose, under its ``Reach``. With ``keep_alive`` the connections to each
    host are kept for the next request to it (one pool per host name, so a connection is only
    ever used under the name its certificate was checked for); otherwise each request has its own.
    Bound to the event loop that first uses it: ``aclose()`` it there."""

    def __init__(
        self,
        resolver: Resolver,
        reach: Reach,
        *,
        timeout_s: float,
        user_agent: str,
        keep_alive: bool = False,
    ) -> None:
        self.resolver = resolver
        self.reach = reach
        self.timeout_s = timeout_s
        self.user_agent = user_agent
        self.keep_alive = keep_alive
        self._tls = httpx.create_ssl_context(trust_env=False)  # certifi's CAs, whatever SSL_CERT_FILE says
        if reach.ca_file is not None:
            self._tls.load_verify_locations(cafile=str(reach.ca_file))
        self._kept: dict[str, httpx.AsyncClient] = {}

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        content: bytes = b"",
        read_limit: int = 0,
    ) -> Answer:
        """Make the request and read at most ``read_limit`` bytes of the answer's body (more is
        ``body_too_large``), all within ``timeout_s``."""
        problem = self.reach.url_problem(url, "the URL")
        if problem is not None:
            raise OutboundError("url_not_allowed", problem)
        try:
            with anyio.fail_after(self.timeout_s):
                return await self._request(method, url, headers or {}, content, read_limit)
        except TimeoutError:
            raise OutboundError("timeout") from None

    async def vetted_address(self, host: str, port: int) -> IPAddress:
        """The address to connect to for ``host``: the first it resolves to, if every one of them
        may be reached."""
        try:
            addresses = [parse_address(text) for text in await self.resolver.addresses(host, port)]
        except (OSError, ValueError):  # no address, or not one
            raise OutboundError("dns_failed") from None
        allowed = self.reach.allow_private
        if not addresses or not all(address_allowed(a, allow_private=allowed) for a in addresses):
            raise OutboundError("address_not_allowed")
        return addresses[0]

    async def aclose(self) -> None:
        kept, self._kept = list(self._kept.values()), {}
        for http in kept:
            await http.aclose()

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes, read_limit: int
    ) -> Answer:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or 443
        address = await self.vetted_address(host, port)
        pinned = f"[{address}]" if address.version == 6 else str(address)
        target = f"https://{pinned}:{port}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")
        sent = {**headers, "Host": parts.netloc, "User-Agent": self.user_agent}
        http, kept = self._client_for(host)
        try:
            request = http.build_request(
                method, target, headers=sent, content=content, extensions={"sni_hostname": host}
            )
            response = await http.send(request, stream=True)
            try:
                body = await _read_capped(response, read_limit)
            finally:
                await response.aclose()
        except httpx.TimeoutException:
            raise OutboundError("timeout") from None
        except (httpx.HTTPError, OSError) as error:
            raise OutboundError("tls_failed" if _is_tls(error) else "connect_failed") from None
        finally:
            if not kept:
                await http.aclose()
        return Answer(response.status_code, response.headers, body)

    def _client_for(self, host: str) -> tuple[httpx.AsyncClient, bool]:
        """The client for a request to ``host``, and whether it is kept (else the request closes
        it): a kept one is never closed while a request of another task may be using it."""
        http = self._kept.get(host)
        if http is not None:
            return http, True
        http = self._new_client()
        if self.keep_alive and len(self._kept) < MAX_KEPT_HOSTS:
            self._kept[host] = http
            return http, True
        return http, False

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            verify=self._tls, trust_env=False, follow_redirects=False, timeout=self.timeout_s
        )


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    if limit <= 0:
        return b""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise OutboundError("body_too_large", f"more than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _is_tls(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is a TLS failure: an untrusted or mismatched
    certificate, a handshake the far end refused."""
    seen: BaseException | None = error
    for _ in range(8):  # a chain is short; never follow one for ever
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
