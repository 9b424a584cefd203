"""Redirect URIs a public client may register, and how a request's ``redirect_uri`` is matched.

Allowed: ``https`` (any host); ``http`` on a loopback host (127.0.0.1, [::1], localhost), whose
port may differ at use (RFC 8252 §7.3); or a private-use scheme with a host, such as
``cursor://anysphere.cursor-retrieval/oauth/callback`` (RFC 8252 §7.1). Never a fragment, userinfo,
whitespace, or a scheme that runs or reads something (``javascript:``, ``data:``, ``file:``, …).
Otherwise matching is exact string comparison.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

MAX_REDIRECT_URI = 2048
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]{0,63}$")
HOST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_-]{1,63})*\.?|[0-9a-f:.]+)$")
FORBIDDEN_SCHEMES = frozenset(
    {
        "javascript",
        "vbscript",
        "data",
        "file",
        "filesystem",
        "blob",
        "about",
        "ftp",
        "ws",
        "wss",
        "view-source",
    }
)


def redirect_uri_problem(uri: object) -> str | None:
    """Why ``uri`` cannot be registered as a redirect URI, or ``None`` when it can."""
    if not isinstance(uri, str) or not uri:
        return "a redirect URI must be a non-empty string"
    if len(uri) > MAX_REDIRECT_URI:
        return f"a redirect URI must be at most {MAX_REDIRECT_URI} characters"
    if any(not 0x21 <= ord(ch) <= 0x7E for ch in uri):
        return "a redirect URI must be printable ASCII without spaces"
    parts = _split(uri)
    if parts is None or not parts.scheme:
        return "a redirect URI must be an absolute URI"
    if not SCHEME.fullmatch(parts.scheme) or parts.scheme in FORBIDDEN_SCHEMES:
        return f"the scheme {parts.scheme!r} is not allowed for a redirect URI"
    if "#" in uri:
        return "a redirect URI must not have a fragment"
    if "@" in parts.netloc:
        return "a redirect URI must not carry userinfo"
    host = parts.hostname or ""
    if not host or not HOST.fullmatch(host):
        return "a redirect URI must name a host"
    if parts.scheme == "http" and host not in LOOPBACK_HOSTS:
        return "http redirect URIs are allowed only on a loopback host (127.0.0.1, [::1], localhost)"
    return None


def is_loopback(uri: str) -> bool:
    parts = _split(uri)
    return parts is not None and parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS


def redirect_host(uri: str) -> str:
    """What the consent page names as the place the browser returns to."""
    parts = _split(uri)
    if parts is None:
        return uri
    host = parts.hostname or ""
    if parts.scheme in ("http", "https"):
        return f"{host}:{parts.port}" if parts.port else host
    return f"{parts.scheme}://{host}"


def csp_source(uri: str) -> str | None:
    """The Content-Security-Policy source that lets the consent form's redirect reach ``uri``."""
    if redirect_uri_problem(uri) is not None:
        return None
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}:"


def redirect_uri_matches(registered: str, requested: str) -> bool:
    """Exact match, except that a loopback http URI matches on any port."""
    if registered == requested:
        return True
    if not (is_loopback(registered) and is_loopback(requested)):
        return False
    a, b = urlsplit(registered), urlsplit(requested)
    return (a.hostname, a.path, a.query) == (b.hostname, b.path, b.query) and "#" not in requested


def _split(uri: str) -> SplitResult | None:
    try:
        parts = urlsplit(uri)
        _ = parts.port  # raises for a malformed port
    except ValueError:
        return None
    return parts
