"""The web pages' files: read from the package once, at start-up, each with its content type, a
strong ETag, its cache policy and the security headers every browser-facing response carries.

Only known file types are served (an unknown one in a served folder stops the start-up), with an
explicit content type rather than the platform's MIME table. Vendored files are checked against
``vendor/manifest.json`` as they are read, and only the files it lists are served.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from webapp.vendor.update import load_manifest, sha256_hex

PACKAGE = Path(__file__).resolve().parent

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".webmanifest": "application/manifest+json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}
LICENSE_TYPE = "text/plain; charset=utf-8"  # vendored LICENSE files have no extension

# Versioned vendor files never change under their URL; everything else is revalidated (ETag) on
# every use, so a deploy shows at once: pages, the manifest, the service worker, our scripts.
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


def _policy(connect_src: str) -> str:
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' blob:",  # an attachment, opened in the page (webapp/app/attachments.js)
            "font-src 'self'",
            f"connect-src {connect_src}",
            "worker-src 'self'",
            "manifest-src 'self'",
            "media-src 'none'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


CONTENT_SECURITY_POLICY = _policy("'self'")
# The service worker's own policy (a worker gets the one its script is served with): it alone may
# connect elsewhere, to make the http request of a notification's button when the person taps it,
# in the notification or in the open app (which asks the worker). It renders nothing; the pages keep
# 'self', so nothing a page shows can reach another origin.
WORKER_CONTENT_SECURITY_POLICY = _policy("'self' http: https:")
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
WORKER_SECURITY_HEADERS = SECURITY_HEADERS | {"Content-Security-Policy": WORKER_CONTENT_SECURITY_POLICY}


class AssetError(Exception):
    """A served folder holds a file that cannot be served, or a vendored file was altered."""


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    cache_control: str
    etag: str  # strong: a digest of the body
    security: Mapping[str, str] = field(default_factory=lambda: SECURITY_HEADERS)

    @classmethod
    def of(cls, body: bytes, content_type: str, cache_control: str) -> Asset:
        return cls(body, content_type, cache_control, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')

    def respond(self, request: Request, status_code: int = 200) -> Response:
        """The asset as a response to ``request``: 304 when the browser's copy is current."""
        headers = {**self.security, "Cache-Control": self.cache_control, "ETag": self.etag}
        if status_code == 200 and _matches(request.headers.get("if-none-match"), self.etag):
            return Response(status_code=304, headers=headers)
        headers["Content-Type"] = self.content_type
        return Response(self.body, status_code=status_code, headers=headers)


def _matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags


def read_asset(path: Path, cache_control: str = REVALIDATE) -> Asset:
    """One file as an asset; a file type not in ``CONTENT_TYPES`` is refused."""
    content_type = LICENSE_TYPE if path.name == "LICENSE" else CONTENT_TYPES.get(path.suffix)
    if content_type is None:
        raise AssetError(f"{path}: no content type for {path.suffix or 'a name without a suffix'}")
    return Asset.of(path.read_bytes(), content_type, cache_control)


def read_folder(folder: Path) -> dict[str, Asset]:
    """Every file under ``folder`` by its path relative to it (``/``-separated); dotfiles and
    editor backups are left out."""
    return {
        path.relative_to(folder).as_posix(): read_asset(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not _ignored(path.relative_to(folder))
    }


def _ignored(relative: Path) -> bool:
    return any(part.startswith(".") or part.endswith("~") for part in relative.parts)


def read_vendor(folder: Path) -> dict[str, Asset]:
    """The vendored files ``manifest.json`` lists as served, by ``<package folder>/<file>``,
    immutable; a file whose SHA-256 differs from the manifest stops the start-up."""
    assets: dict[str, Asset] = {}
    for directory, entry in load_manifest(folder / "manifest.json").items():
        if not entry.get("served", True):
            continue  # kept for the tests (axe-core), never served
        for name, digest in entry["files"].items():
            asset = read_asset(folder / directory / name, IMMUTABLE)
            if sha256_hex(asset.body) != digest:
                raise AssetError(f"vendor/{directory}/{name} does not match vendor/manifest.json")
            assets[f"{directory}/{name}"] = asset
    return assets
