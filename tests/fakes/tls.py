"""TLS for the fakes of far ends the server reaches through its outbound policy (https only): one
throwaway CA (trustme) for the test run, whose PEM file a test hands the server as the purpose's
extra CA (``web_push_ca_file``, ``cimd_ca_file``), and a certificate from it for the loopback
address and the names tests resolve to it (the push services' own among them)."""

from __future__ import annotations

import atexit
import functools
import shutil
import ssl
import tempfile
from pathlib import Path

import trustme

NAMES = (
    "127.0.0.1",
    "localhost",
    "push.test",
    "fcm.googleapis.com",
    "updates.push.services.mozilla.com",
    "web.push.apple.com",
    "wns2-par02p.notify.windows.com",
)


@functools.cache
def _ca() -> tuple[trustme.CA, Path]:
    ca = trustme.CA()
    folder = Path(tempfile.mkdtemp(prefix="relaybox-test-ca-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return ca, path


def ca_file() -> Path:
    """The PEM file of the run's CA: what a server that is to trust the fakes is given."""
    return _ca()[1]


def server_context() -> ssl.SSLContext:
    """A server-side context with a certificate for ``NAMES``, from the run's CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _ca()[0].issue_cert(*NAMES).configure_cert(context)
    return context
