"""The device state file: private from the first byte, replaced atomically, read back exactly."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from client.state import DeviceState, Peer, PendingPairing, StateError
from client.state_file import default_state_path
from core.domain.keys import b64encode, generate_keypair
from core.domain.safety import safety_number


def make_state(role: str = "phone") -> DeviceState:
    secret, public = generate_keypair()
    _, server_public = generate_keypair()
    _, peer_public = generate_keypair()
    return DeviceState(
        server="http://127.0.0.1:8787",
        role="phone" if role == "phone" else "computer",
        device_id="dev-1",
        device_token="rbd_" + "A" * 43,
        secret_key=b64encode(secret),
        public_key=b64encode(public),
        server_public_key=b64encode(server_public),
        name="Pixel",
        account_id="acct-1",
        peers={
            "dev-2": Peer(
                name="laptop", surface_kind="cli", public_key=b64encode(peer_public), pair_id="pair_1"
            )
        },
        pending=PendingPairing(code="012345", expires_at=1_700_000_000),
    )


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_saved_state_reads_back_equal(tmp_path: Path) -> None:
    state = make_state()
    path = tmp_path / "phone.json"
    state.save(path)
    assert DeviceState.load(path) == state


def test_state_file_is_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        make_state().save(tmp_path / "nested" / "phone.json")
    finally:
        os.umask(previous)
    assert mode_of(tmp_path / "nested" / "phone.json") == 0o600
    assert mode_of(tmp_path / "nested") == 0o700


def test_the_temporary_file_is_private_before_it_replaces_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace: Callable[[str | Path, str | Path], None] = os.replace
    seen: list[int] = []

    def watching_replace(source: str | Path, target: str | Path) -> None:
        seen.append(stat.S_IMODE(os.stat(source).st_mode))
        assert Path(source).parent == Path(target).parent  # same folder, so the rename is atomic
        real_replace(source, target)

    previous = os.umask(0)
    monkeypatch.setattr(os, "replace", watching_replace)
    try:
        make_state().save(tmp_path / "phone.json")
    finally:
        os.umask(previous)
    assert seen == [0o600]


def test_saving_again_replaces_the_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "phone.json"
    state = make_state()
    state.save(path)
    first_inode = path.stat().st_ino
    state.name = "renamed"
    state.save(path)
    assert path.stat().st_ino != first_inode  # a new file was renamed over the old one
    assert DeviceState.load(path).name == "renamed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["phone.json"]


def test_a_failed_replace_keeps_the_old_file_and_removes_the_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "phone.json"
    state = make_state()
    state.save(path)
    before = path.read_bytes()

    def failing_replace(source: str | Path, target: str | Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    state.name = "never written"
    with pytest.raises(OSError, match="No space left"):
        state.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["phone.json"]


def test_loading_a_missing_file_is_no_state(tmp_path: Path) -> None:
    with pytest.raises(StateError) as caught:
        DeviceState.load(tmp_path / "absent.json")
    assert caught.value.code == "no_state"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda data: "not json",
        lambda data: json.dumps({**data, "version": 2}),
        lambda data: json.dumps({**data, "role": "tablet"}),
        lambda data: json.dumps({**data, "public_key": "AAAA"}),
        lambda data: json.dumps({**data, "public_key": data["server_public_key"]}),
        lambda data: json.dumps({**data, "peers": {"dev-2": {"name": "x"}}}),
        lambda data: json.dumps({k: v for k, v in data.items() if k != "device_token"}),
    ],
    ids=["not-json", "version", "role", "short-key", "key-not-of-secret", "peer", "no-token"],
)
def test_a_malformed_file_is_invalid_state(
    tmp_path: Path, mangle: Callable[[dict[str, object]], str]
) -> None:
    path = tmp_path / "phone.json"
    path.write_text(mangle(make_state().to_json()))
    with pytest.raises(StateError) as caught:
        DeviceState.load(path)
    assert caught.value.code == "invalid_state"


def test_loading_with_the_other_role_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "computer.json"
    make_state("computer").save(path)
    with pytest.raises(StateError) as caught:
        DeviceState.load(path, role="phone")
    assert caught.value.code == "wrong_role"


def test_repr_shows_neither_the_credential_nor_the_secret_key() -> None:
    state = make_state()
    text = repr(state)
    assert state.device_token not in text
    assert state.secret_key not in text


def test_a_new_peer_comes_with_the_safety_number_of_both_keys() -> None:
    state = make_state()
    _, other = generate_keypair()
    paired = state.add_peer(
        "dev-3", Peer(name="desk", surface_kind="desktop", public_key=b64encode(other), pair_id="p")
    )
    assert paired.safety_number == safety_number(other, state.public_key_bytes)
    assert state.peers["dev-3"].name == "desk"


def test_default_paths_follow_the_state_dir_variable_or_the_home_config() -> None:
    assert default_state_path("phone", {"RELAYBOX_CLIENT_STATE_DIR": "/srv/rb"}) == Path("/srv/rb/phone.json")
    assert default_state_path("computer", {}) == Path.home() / ".config" / "relaybox" / "computer.json"
