"""Answer callbacks on the wire: what a ``callback_url`` may be, which addresses it may reach, and
how each POST is signed (Standard Webhooks, https://www.standardwebhooks.com, symmetric ``v1``).

Pure: no I/O. The server checks a URL's shape when the question is asked (``url_problem``) and
refuses one whose host is plainly private already then (``plainly_private``); at each delivery
it resolves the host and holds every address to ``address_allowed`` before connecting.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import ipaddress
import math
import re
from datetime import UTC
from urllib.parse import SplitResult, urlsplit

MAX_URL_BYTES = 2048
SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"
# What a receiver should accept: a webhook-timestamp older (or newer) than this is a replay.
TOLERANCE_S = 300
LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
LOCAL_NAMES = ("localhost", "localhost.")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a callback URL (``invalid_callback_url``), or None: https only, at most
    ``MAX_URL_BYTES`` of printable ASCII, a host name or IP address, no userinfo, no fragment."""
    if len(url.encode("utf-8")) > MAX_URL_BYTES or not url.isascii() or not url.isprintable() or " " in url:
        return "callback_url must be at most 2048 bytes of printable ASCII without spaces"
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return "callback_url is not a URL"
    if parts.scheme != "https":
        return "callback_url must be an https URL"
    if "@" in parts.netloc or "#" in url:
        return "callback_url must carry no userinfo and no fragment"
    if not _valid_host(parts):
        return "callback_url must name a host: a DNS name or an IP address"
    return None


def callback_host(url: str) -> str:
    """The host of a URL ``url_problem`` accepted, lowercased, without IPv6 brackets."""
    return urlsplit(url).hostname or ""


def plainly_private(host: str) -> bool:
    """Whether ``host`` names a non-public target without asking DNS: a loopback name, or an IP
    address ``address_allowed`` refuses."""
    address = _ip(host)
    if address is None:
        return host in LOCAL_NAMES or host.endswith((".localhost", ".localhost."))
    return not address_allowed(address, allow_private=False)


def address_allowed(address: IPAddress, *, allow_private: bool) -> bool:
    """Whether a request the server makes for someone else (a callback; an OAuth client's metadata
    document, ``oauth.client_metadata``) may connect to ``address``: a global unicast address, or
    any with ``allow_private`` (the operator's ``RELAYBOX_CALLBACKS_ALLOW_PRIVATE``)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if allow_private:
        return not address.is_unspecified and not address.is_multicast
    return address.is_global and not address.is_multicast


def parse_address(text: str) -> IPAddress:
    """An address as ``getaddrinfo`` gives it (an IPv6 one may carry a ``%zone``)."""
    return ipaddress.ip_address(text.split("%", 1)[0])


def new_secret_text(key: bytes) -> str:
    """The signing secret as a receiver is given it: ``whsec_`` and the key in standard base64."""
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def signature(key: bytes, *, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: ``v1,`` and the base64 HMAC-SHA256 of
    ``{webhook-id}.{webhook-timestamp}.{body}``."""
    signed = b"%s.%d.%s" % (webhook_id.encode("ascii"), timestamp, body)
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def _valid_host(parts: SplitResult) -> bool:
    host = parts.hostname
    if not host:
        return False
    if _ip(host) is not None:
        return True
    if parts.netloc.startswith("["):
        return False  # brackets hold an IPv6 address and nothing else
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or not all(LABEL.match(label) for label in labels):
        return False
    return not labels[-1].isdigit()  # "https://2130706433/": an address in disguise, not a name


def _ip(host: str) -> IPAddress | None:
    try:
        return parse_address(host)
    except ValueError:
        return None


def retry_after_seconds(value: str | None, now: float) -> int | None:
    """A response's ``Retry-After`` (RFC 9110: delay-seconds or an HTTP date, read against ``now``)
    in whole seconds from now, at least 0; None when absent or neither form."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # not "²" or "١٢": str.isdigit says yes, int() refuses
        return int(text[:12])  # a delay beyond 12 digits is capped by the caller all the same
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 850 / asctime forms carry no zone: they are GMT
        when = when.replace(tzinfo=UTC)
    return max(0, math.ceil(when.timestamp() - now))
