"""Where the server's own requests may go: the rules for every request it makes to a URL someone
else chose (a browser's web-push endpoint, a question's ``callback_url``, an OAuth client's
metadata document). ``core.adapters.outbound`` makes those requests and holds each to these rules.

Pure: no I/O. A URL must be https, at most ``MAX_URL_BYTES`` of printable ASCII (no spaces, no
control characters), name a host (a DNS name or an IP address) and carry no userinfo or fragment
(``url_problem``). A purpose may keep to a list of hosts (``host_allowed``: web push keeps to the
push services browsers use, ``WEB_PUSH_HOSTS``). Every address a host resolves to must be a
global unicast address (``address_allowed``), judged on the IPv4 address inside any IPv6 form that
carries one: IPv4-mapped, IPv4-compatible, SIIT (``::ffff:0:a.b.c.d``), NAT64 (``64:ff9b::/96``)
and 6to4 (``2002::/16``). The local-use NAT64 prefix and Teredo, whose IPv4 address inside
depends on the network, are refused outright.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import SplitResult, urlsplit

MAX_URL_BYTES = 2048
LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
LOCAL_NAMES = ("localhost", "localhost.")
# The push services browsers subscribe with (Chrome and Edge's FCM, Firefox's autopush, Safari's
# and Windows' own); ``*.`` admits any name below the domain, not the domain itself.
WEB_PUSH_HOSTS = (
    "fcm.googleapis.com",
    "updates.push.services.mozilla.com",
    "*.push.apple.com",
    "*.notify.windows.com",
)
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052: the IPv4 address in the last 32 bits
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 7915's IPv4-translated: the last 32 bits
_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291's deprecated IPv4-compatible: the last 32 bits
_REFUSED = (
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # RFC 8215 local-use NAT64: a network's own translator
    ipaddress.IPv6Network("2001::/32"),  # Teredo: a tunnel to a client behind NAT
)


def url_problem(url: str, name: str) -> str | None:
    """Why ``url`` cannot be the URL the server is asked to reach (``name`` says which field it
    is), or None."""
    if len(url.encode("utf-8")) > MAX_URL_BYTES or not url.isascii() or not url.isprintable() or " " in url:
        return f"{name} must be at most {MAX_URL_BYTES} bytes of printable ASCII without spaces"
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return f"{name} is not a URL"
    if parts.scheme != "https":
        return f"{name} must be an https URL"
    if "@" in parts.netloc or "#" in url:
        return f"{name} must carry no userinfo and no fragment"
    if not _valid_host(parts):
        return f"{name} must name a host: a DNS name or an IP address"
    return None


def url_host(url: str) -> str:
    """The host of a URL ``url_problem`` accepted, lowercased, without IPv6 brackets."""
    return urlsplit(url).hostname or ""


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``allowed``: a name or address as written (case and a final dot
    aside), or ``*.domain`` for any name below ``domain``."""
    wanted = _normal_host(host)
    for pattern in allowed:
        entry = _normal_host(pattern)
        if entry.startswith("*."):
            if wanted.endswith(entry[1:]) and len(wanted) > len(entry) - 1:
                return True
        elif wanted == entry:
            return True
    return False


def plainly_private(host: str) -> bool:
    """Whether ``host`` names a non-public target without asking DNS: a loopback name, or an IP
    address ``address_allowed`` refuses."""
    address = _ip(host)
    if address is None:
        return host in LOCAL_NAMES or host.endswith((".localhost", ".localhost."))
    return not address_allowed(address, allow_private=False)


def address_allowed(address: IPAddress, *, allow_private: bool) -> bool:
    """Whether the server may connect to ``address`` for someone else: a global unicast address,
    or with ``allow_private`` (an operator's setting, for a LAN or tests) any address but the
    unspecified and multicast ones. An IPv6 form that carries an IPv4 address is judged by that."""
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in _REFUSED):
            return False
        address = embedded_ipv4(address) or address
    if allow_private:
        return not address.is_unspecified and not address.is_multicast
    return address.is_global and not address.is_multicast


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 transition form carries (mapped, SIIT, compatible, NAT64, 6to4),
    else None. ``::`` and ``::1`` are themselves, not IPv4-compatible forms."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _SIIT or (address in _COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def parse_address(text: str) -> IPAddress:
    """An address as ``getaddrinfo`` gives it (an IPv6 one may carry a ``%zone``)."""
    return ipaddress.ip_address(text.split("%", 1)[0])


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


def _normal_host(host: str) -> str:
    text = host.strip().lower().removeprefix("[").removesuffix("]").removesuffix(".")
    address = _ip(text)
    return text if address is None else str(address)
