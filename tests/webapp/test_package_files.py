"""The files the pages serve: what the loader refuses, the vendored libraries' checksums, and that
the package ships every served file."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from webapp.assets import PACKAGE, AssetError, read_folder, read_vendor
from webapp.routes import web_routes
from webapp.vendor import update

ROOT = PACKAGE.parent
SERVED_FOLDERS = ("pages", "static", "app")


def test_the_committed_vendor_files_match_their_manifest_and_pins() -> None:
    assert update.committed_problems() == []


def test_every_vendored_package_keeps_its_licence_and_pins_an_integrity() -> None:
    for entry in update.load_manifest().values():
        assert "LICENSE" in entry["files"]
        assert str(entry["integrity"]).startswith("sha512-")
        assert (PACKAGE / "vendor" / str(entry["directory"]) / "LICENSE").read_text().strip()


def test_an_edited_vendor_file_is_caught_by_the_check_and_refused_at_start_up(tmp_path: Path) -> None:
    vendor = tmp_path / "vendor"
    shutil.copytree(PACKAGE / "vendor", vendor, ignore=shutil.ignore_patterns("__pycache__"))
    target = vendor / "tweetnacl-1.0.3" / "nacl-fast.js"
    target.write_bytes(target.read_bytes().replace(b"'use strict';", b"'use strict'; /* edited */", 1))
    assert any("nacl-fast.js" in problem for problem in update.committed_problems(vendor))
    with pytest.raises(AssetError, match=r"nacl-fast\.js"):
        read_vendor(vendor)


def test_a_file_left_out_of_the_manifest_is_caught(tmp_path: Path) -> None:
    vendor = tmp_path / "vendor"
    shutil.copytree(PACKAGE / "vendor", vendor, ignore=shutil.ignore_patterns("__pycache__"))
    (vendor / "noble-hashes-2.4.0" / "extra.js").write_text("export {};\n")
    assert any("extra.js" in problem for problem in update.committed_problems(vendor))
    manifest = json.loads((vendor / "manifest.json").read_text())
    manifest["packages"][0]["version"] = "1.0.2"
    (vendor / "manifest.json").write_text(json.dumps(manifest))
    assert any("1.0.2" in problem for problem in update.committed_problems(vendor))


def test_only_files_the_manifest_lists_as_served_are_served_from_vendor() -> None:
    served = set(read_vendor(PACKAGE / "vendor"))
    manifest = update.load_manifest().items()
    listed = {f"{d}/{name}" for d, entry in manifest if entry.get("served", True) for name in entry["files"]}
    assert served == listed
    assert not any(path.endswith(".py") or "manifest" in path for path in served)
    # axe-core is for the tests: vendored and checked like the rest, never served to a page.
    assert [d for d, entry in manifest if not entry.get("served", True)] == ["axe-core-4.14.1"]
    assert not any(path.startswith("axe-core") for path in served)


def test_a_file_of_an_unknown_type_stops_the_start_up(tmp_path: Path) -> None:
    package = tmp_path / "webapp"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    (package / "static" / "notes.docx").write_bytes(b"\x00")
    with pytest.raises(AssetError, match=r"\.docx"):
        web_routes(package)


def test_hidden_files_and_editor_backups_are_not_served(tmp_path: Path) -> None:
    (tmp_path / ".secret.json").write_text("{}")
    (tmp_path / "site.css~").write_text("")
    (tmp_path / "site.css").write_text("body{}")
    assert list(read_folder(tmp_path)) == ["site.css"]


def test_the_package_data_ships_every_served_file() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {path for pattern in package_data["webapp"] for path in PACKAGE.glob(pattern) if path.is_file()}
    vendor = PACKAGE / "vendor"
    shipped |= {path for pattern in package_data["webapp.vendor"] for path in vendor.glob(pattern)}
    served = {PACKAGE / folder / name for folder in SERVED_FOLDERS for name in read_folder(PACKAGE / folder)}
    served |= {vendor / name for name in read_vendor(vendor)} | {vendor / "manifest.json"}
    assert served - shipped == set()
