"""Where the phone and the computer save what they receive when --downloads is not given: each in a
folder of its own in the user's downloads folder ($XDG_DOWNLOAD_DIR, else ~/Downloads). Files
reaching both through real commands: tests/e2e/test_file_transfer_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from client.downloads import default_downloads_dir, user_downloads_dir


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        (None, "home/Downloads"),
        ("", "home/Downloads"),
        ("relative/dir", "home/Downloads"),  # not an absolute path: ignored
        ("~/Téléchargements", "home/Téléchargements"),
        ("/elsewhere/dl", "/elsewhere/dl"),
    ],
)
def test_the_users_downloads_folder_is_xdg_download_dir_else_downloads_in_home(
    home: Path, configured: str | None, expected: str
) -> None:
    environ = {} if configured is None else {"XDG_DOWNLOAD_DIR": configured}
    assert user_downloads_dir(environ) == home.parent / expected


def test_phone_and_computer_each_have_their_own_folder(home: Path) -> None:
    assert default_downloads_dir("phone", {}) == home / "Downloads" / "relaybox-phone"
    assert default_downloads_dir("computer", {}) == home / "Downloads" / "relaybox"
    assert default_downloads_dir("computer", {"XDG_DOWNLOAD_DIR": "/d"}) == Path("/d/relaybox")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["tail"], "$XDG_DOWNLOAD_DIR/relaybox, else ~/Downloads/relaybox"),
        (["phone", "run"], "$XDG_DOWNLOAD_DIR/relaybox-phone, else ~/Downloads/relaybox-phone"),
    ],
)
def test_the_help_names_the_default(
    command: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    assert expected in " ".join(capsys.readouterr().out.split())
