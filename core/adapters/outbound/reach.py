"""What each purpose of the server's outbound requests may reach, from the settings: web push keeps
to the push services' hosts (``WEB_PUSH_HOSTS`` and ``web_push_hosts``); answer callbacks and
client metadata documents may name any host, public addresses only. Each has its own switch for
private addresses and its own extra CAs, for a LAN or for tests: the defaults reach only the
public internet, with public CAs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from core.domain.outbound import WEB_PUSH_HOSTS, host_allowed, plainly_private, url_problem
from core.settings import Settings


@dataclass(frozen=True)
class Reach:
    """What one purpose may reach: private addresses too (``allow_private``), certificates from
    extra CAs (``ca_file``, PEM), and only ``hosts`` (``core.domain.outbound.host_allowed``) when
    they are given."""

    allow_private: bool = False
    ca_file: Path | None = None
    hosts: tuple[str, ...] | None = None

    def url_problem(self, url: str, name: str) -> str | None:
        """Why ``url`` (the field ``name``) is not one this purpose may reach, judged without DNS:
        its shape, its host (when the purpose keeps to a list), or an IP address or loopback name
        that is plainly not public (unless ``allow_private``). None when it may be tried."""
        problem = url_problem(url, name)
        if problem is not None:
            return problem
        host = urlsplit(url).hostname or ""
        if self.hosts is not None and not host_allowed(host, self.hosts):
            return f"{name} names a host this server does not send to"
        if not self.allow_private and plainly_private(host):
            return f"{name} names a private or loopback host"
        return None


def web_push_reach(settings: Settings) -> Reach:
    return Reach(
        allow_private=settings.web_push_allow_private,
        ca_file=settings.web_push_ca_file,
        hosts=(*WEB_PUSH_HOSTS, *settings.web_push_hosts),
    )


def callback_reach(settings: Settings) -> Reach:
    return Reach(allow_private=settings.callbacks_allow_private, ca_file=settings.callbacks_ca_file)


def client_metadata_reach(settings: Settings) -> Reach:
    return Reach(allow_private=settings.cimd_allow_private, ca_file=settings.cimd_ca_file)
