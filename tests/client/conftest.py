"""Every client test runs with its own downloads folder, so that a command or ``PhoneOps`` left at
its default (``client.downloads``) never writes into the real one."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_downloads(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("downloads")
    monkeypatch.setenv("XDG_DOWNLOAD_DIR", str(folder))
    return folder
