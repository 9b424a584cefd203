"""The browser's cryptography, vendored from the npm registry at exact versions.

Each pinned package is fetched with ``npm pack`` (the registry's own client), its tarball checked
against the integrity npm reports (SHA-512) and, when verifying, against the integrity recorded in
``manifest.json``; only the files the pages load are kept, beside the package's LICENSE, in
``<name>-<version>/``. The manifest records each kept file's SHA-256, which a test and the app's
start-up check (``webapp.assets``), so a file edited by hand is caught.

    python -m webapp.vendor.update            # re-download every pin; fail unless the committed files match
    python -m webapp.vendor.update --write    # after changing PINS: download and write files + manifest
    python -m webapp.vendor.update --offline  # only compare the committed files with the manifest

The pages import these paths literally (``static/relaybox-wire*.js``, ``app/sw.js``): a new version
is a new directory, so those imports change with it and the old URLs stay cacheable for ever.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypedDict

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
LICENSE = "LICENSE"
NPM_TIMEOUT_S = 120


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    files: tuple[str, ...]  # what the pages load, from the tarball's package/ folder
    license: str
    served: bool = True  # False: for the tests only, never served under /static/vendor/

    @property
    def kept(self) -> tuple[str, ...]:
        """The files' names in the vendor folder: each kept flat, under its own name."""
        return tuple(PurePosixPath(path).name for path in self.files)

    @property
    def directory(self) -> str:
        return f"{self.name.removeprefix('@').replace('/', '-')}-{self.version}"

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


PINS = (
    # NaCl box (X25519 + XSalsa20-Poly1305), scalarMult, randomBytes, SHA-512: a classic script,
    # so a classic service worker can importScripts it.
    Pin("tweetnacl", "1.0.3", ("nacl-fast.js",), "Unlicense"),
    # XChaCha20-Poly1305 (file chunks): ES modules, for the pages.
    Pin("@noble/ciphers", "2.4.0", ("chacha.js", "_arx.js", "_poly1305.js", "utils.js"), "MIT"),
    # HKDF-SHA-256 and SHA-256: ES modules, for the pages.
    Pin("@noble/hashes", "2.4.0", ("hkdf.js", "hmac.js", "sha2.js", "_md.js", "_u64.js", "utils.js"), "MIT"),
    # Markdown to HTML for the open web app's notifications (webapp/app/inbox.js: raw HTML off, links
    # http/https/mailto only, no images). Its browser bundle carries its dependencies: entities
    # (BSD-2-Clause), linkify-it, mdurl, uc.micro and punycode.js (MIT). 14.3.3: the 14 line's latest,
    # past the ReDoS fixed in 14.1.1 (GHSA-38c4-r59v-3vqw) and CVE-2026-48988 (14.2.0).
    Pin("markdown-it", "14.3.3", ("dist/markdown-it.min.js",), "MIT"),
    # The accessibility checks of every page and view (tests/webapp/accessibility.py), injected by
    # the tests as an init script: no page links it, and the server does not serve it.
    Pin("axe-core", "4.14.1", ("axe.min.js",), "MPL-2.0", served=False),
)


class PackageEntry(TypedDict):
    """One package in manifest.json."""

    name: str
    version: str
    license: str
    integrity: str  # the npm tarball's, "sha512-<base64>"
    directory: str
    files: dict[str, str]  # kept file → SHA-256 (hex)
    served: bool  # False: kept for the tests, never served


class VendorError(Exception):
    """A download or a committed file does not match what was pinned."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sri_sha512(data: bytes) -> str:
    """The Subresource-Integrity form npm uses for a tarball: ``sha512-<base64>``."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def load_manifest(path: Path = MANIFEST) -> dict[str, PackageEntry]:
    """The manifest's packages by directory name."""
    entries: list[PackageEntry] = json.loads(path.read_text(encoding="utf-8"))["packages"]
    return {entry["directory"]: entry for entry in entries}


def committed_problems(root: Path = HERE) -> list[str]:
    """What is wrong with the committed vendor files (empty when they match the manifest and PINS)."""
    problems: list[str] = []
    packages = load_manifest(root / "manifest.json")
    if sorted(packages) != sorted(pin.directory for pin in PINS):
        problems.append(f"manifest lists {sorted(packages)}, PINS {sorted(p.directory for p in PINS)}")
    for pin in PINS:
        entry = packages.get(pin.directory)
        if entry is None:
            continue
        wanted = (pin.name, pin.version, pin.license, pin.served)
        recorded = (entry["name"], entry["version"], entry["license"], entry.get("served", True))
        if recorded != wanted:
            problems.append(f"{pin.directory}: manifest says {recorded}, PINS {wanted}")
        files = entry["files"]
        if sorted(files) != sorted((*pin.kept, LICENSE)):
            problems.append(f"{pin.directory}: manifest files {sorted(files)} are not PINS + LICENSE")
        folder = root / pin.directory
        present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        if present != sorted(files):
            problems.append(f"{pin.directory}: folder holds {present}, manifest {sorted(files)}")
        for name, digest in files.items():
            path = folder / name
            if path.is_file() and sha256_hex(path.read_bytes()) != digest:
                problems.append(f"{pin.directory}/{name}: SHA-256 differs from the manifest")
    return problems


def fetch(pin: Pin, workdir: Path) -> tuple[str, dict[str, bytes]]:
    """Download ``pin`` with npm pack; return its integrity and the wanted files' bytes."""
    npm = shutil.which("npm")
    if npm is None:
        raise VendorError("npm is needed to download the pinned packages")
    command = [npm, "pack", pin.spec, "--json", "--pack-destination", str(workdir)]
    # S603: the command is npm with a spec from PINS, never outside input.
    done = subprocess.run(  # noqa: S603
        command, capture_output=True, text=True, timeout=NPM_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise VendorError(f"npm pack {pin.spec} failed: {done.stderr.strip()}")
    (report,) = json.loads(done.stdout)
    if (report["name"], report["version"]) != (pin.name, pin.version):
        raise VendorError(f"npm pack {pin.spec} gave {report['name']}@{report['version']}")
    tarball = (workdir / report["filename"]).read_bytes()
    if sri_sha512(tarball) != report["integrity"]:
        raise VendorError(f"{pin.spec}: the tarball does not match the integrity npm reported")
    return report["integrity"], _extract(tarball, (*pin.files, LICENSE), pin.spec, workdir)


def _extract(tarball: bytes, names: tuple[str, ...], spec: str, workdir: Path) -> dict[str, bytes]:
    archive_path = workdir / "archive.tgz"
    archive_path.write_bytes(tarball)
    found: dict[str, bytes] = {}
    with tarfile.open(archive_path, "r:gz") as archive:
        for name in names:
            member = archive.getmember(f"package/{name}")
            handle = archive.extractfile(member) if member.isfile() else None
            if handle is None:
                raise VendorError(f"{spec}: package/{name} is not a regular file")
            found[PurePosixPath(name).name] = handle.read()
    return found


def verify_against_registry() -> list[str]:
    """Download every pin again; the differences from the committed files and manifest."""
    problems = committed_problems()
    packages = load_manifest()
    with tempfile.TemporaryDirectory() as temporary:
        for pin in PINS:
            integrity, files = fetch(pin, Path(temporary))
            entry = packages.get(pin.directory)
            recorded = entry["integrity"] if entry else None
            if recorded != integrity:
                problems.append(f"{pin.spec}: registry integrity {integrity}, manifest {recorded}")
            for name, data in files.items():
                path = HERE / pin.directory / name
                if not path.is_file() or path.read_bytes() != data:
                    problems.append(f"{pin.directory}/{name} differs from the registry's {pin.spec}")
    return problems


def write_all() -> None:
    """Download every pin and replace the vendor folders and the manifest."""
    entries: list[PackageEntry] = []
    with tempfile.TemporaryDirectory() as temporary:
        for pin in PINS:
            integrity, files = fetch(pin, Path(temporary))
            folder = HERE / pin.directory
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            for name, data in files.items():
                (folder / name).write_bytes(data)
            entries.append(
                {
                    "name": pin.name,
                    "version": pin.version,
                    "license": pin.license,
                    "integrity": integrity,
                    "directory": pin.directory,
                    "files": {name: sha256_hex(data) for name, data in sorted(files.items())},
                    "served": pin.served,
                }
            )
    for stale in HERE.iterdir():  # folders of versions no longer pinned
        if stale.is_dir() and stale.name not in {pin.directory for pin in PINS} and "-" in stale.name:
            shutil.rmtree(stale)
    document = {
        "about": "Written by webapp/vendor/update.py: npm tarball integrity and each kept file's SHA-256.",
        "packages": entries,
    }
    MANIFEST.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        write_all()
        problems = committed_problems()
    elif argv == ["--offline"]:
        problems = committed_problems()
    elif not argv:
        problems = verify_against_registry()
    else:
        print(__doc__)
        return 2
    for problem in problems:
        print(problem, file=sys.stderr)
    print("vendor files: " + ("MISMATCH" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
