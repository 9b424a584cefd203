"""The object-store contract, one body for both stores: the embedded folder (served by relaybox's
own presigned routes) and an S3-compatible bucket (boto3 against moto's server, started here on a
free loopback port). Chunks go up and down through the broker's URLs byte for byte; ending a
transfer deletes its objects and no other's; expiry sweeps them. Then what only S3 signs; that the
bucket refuses URLs used otherwise is test_s3_signatures.py, against a server that checks them."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import pytest
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from starlette.testclient import TestClient

from core.adapters.storage.s3 import S3ObjectStore
from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import sweep_expired
from core.settings import Settings, explicit_settings
from tests.helpers import FakeDevice, pair_computer, register_phone

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client

CHUNK = 1000
BUCKET = "relaybox-contract"
ACCESS_KEY, SECRET_KEY = "test", "test-secret"


def s3_client(endpoint: str | None) -> S3Client:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
    )


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3-compatible server on a free loopback port, for this test session."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3_client(endpoint).create_bucket(Bucket=BUCKET)
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'relaybox.db'}"  # the store is what varies here


@pytest.fixture(params=["embedded", "s3"])
def settings(request: pytest.FixtureRequest, tmp_path: Path, database_url: str) -> Settings:
    common = {"data_dir": tmp_path / "data", "database_url": database_url}
    if request.param == "embedded":
        return explicit_settings(**common)
    endpoint: str = request.getfixturevalue("s3_endpoint")
    return explicit_settings(
        **common,
        s3_bucket=BUCKET,
        s3_endpoint_url=endpoint,
        s3_access_key_id=ACCESS_KEY,
        s3_secret_access_key=SECRET_KEY,
        s3_prefix=f"run-{secrets.token_hex(4)}/",  # tests sharing the bucket never meet
    )


class Objects:
    """What the store holds, whichever it is: object keys under the store's root or prefix."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def keys(self) -> list[str]:
        if self.settings.s3_bucket is None:
            root = self.settings.effective_file_store_dir
            return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        client = s3_client(self.settings.s3_endpoint_url)
        listed = client.list_objects_v2(Bucket=BUCKET, Prefix=self.settings.s3_prefix)
        return sorted(
            item["Key"].removeprefix(self.settings.s3_prefix) for item in listed.get("Contents", [])
        )


class Urls:
    """Uses presigned URLs as a device would: the embedded store's through the in-process app
    (they name the configured origin), a bucket's over the network."""

    def __init__(self, client: TestClient, settings: Settings) -> None:
        self._client = client
        self._base = settings.base_url

    def request(self, method: str, url: str, content: bytes | None = None) -> tuple[int, bytes]:
        if url.startswith(self._base + "/"):
            response = self._client.request(method, url.removeprefix(self._base), content=content)
            return response.status_code, response.content
        with httpx.Client(timeout=10, trust_env=False) as http:
            answer = http.request(method, url, content=content)
            return answer.status_code, answer.content


@pytest.fixture
def urls(client: TestClient, settings: Settings) -> Urls:
    return Urls(client, settings)


def transfer(client: TestClient, sender: FakeDevice, to: FakeDevice, size: int = 2500) -> str:
    body = {"to": to.device_id, "size": size, "chunk_size": CHUNK}
    response = client.post("/v1/transfers", json=body, headers=sender.auth)
    assert response.status_code == 201, response.text
    return str(response.json()["transfer_id"])


def url_of(client: TestClient, device: FakeDevice, transfer_id: str, kind: str, index: int) -> str:
    response = client.post(
        f"/v1/transfers/{transfer_id}/{kind}-urls", json={"indexes": [index]}, headers=device.auth
    )
    assert response.status_code == 200, response.text
    return str(response.json()["urls"][0]["url"])


def upload_all(
    client: TestClient, urls: Urls, sender: FakeDevice, transfer_id: str, sizes: list[int]
) -> None:
    for index, size in enumerate(sizes):
        status, answer = urls.request(
            "PUT", url_of(client, sender, transfer_id, "upload", index), bytes([index]) * size
        )
        assert status == 200, answer


def test_chunks_go_up_and_come_down_byte_for_byte(client: TestClient, urls: Urls, objects: Objects) -> None:
    phone = register_phone(client)
    laptop = pair_computer(client, phone)
    transfer_id = transfer(client, laptop, phone)
    upload_all(client, urls, laptop, transfer_id, [1000, 1000, 500])
    assert objects.keys() == [f"{transfer_id}/0", f"{transfer_id}/1", f"{transfer_id}/2"]
    for index, size in enumerate([1000, 1000, 500]):
        assert urls.request("GET", url_of(client, phone, transfer_id, "download", index)) == (
            200,
            bytes([index]) * size,
        )


def test_ending_a_transfer_deletes_its_objects_and_no_others(
    client: TestClient, urls: Urls, objects: Objects
) -> None:
    phone = register_phone(client)
    laptop = pair_computer(client, phone)
    ended, kept = transfer(client, laptop, phone), transfer(client, phone, laptop, size=100)
    upload_all(client, urls, laptop, ended, [1000, 1000, 500])
    upload_all(client, urls, phone, kept, [100])
    assert client.delete(f"/v1/transfers/{ended}", headers=phone.auth).status_code == 204
    assert objects.keys() == [f"{kept}/0"]
    assert client.delete(f"/v1/transfers/{kept}", headers=phone.auth).status_code == 204
    assert objects.keys() == []


def test_expired_transfers_are_swept_with_their_objects(
    client: TestClient, urls: Urls, objects: Objects, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    laptop = pair_computer(client, phone)
    transfer_id = transfer(client, laptop, phone, size=100)
    upload_all(client, urls, laptop, transfer_id, [100])
    clock.advance(core.settings.file_transfer_ttl_s)
    client.portal.call(core.run, sweep_expired, Principal.system())  # type: ignore[union-attr]
    assert objects.keys() == []


@pytest.fixture
def objects(settings: Settings) -> Objects:
    return Objects(settings)


def test_an_s3_upload_url_signs_its_method_key_size_and_lifetime(s3_endpoint: str) -> None:
    """What the bucket enforces (SigV4): moto accepts any presigned request, so this checks what
    goes into the signature; test_s3_signatures.py checks the refusals against s3rver."""
    store = S3ObjectStore.from_settings(
        explicit_settings(
            s3_bucket=BUCKET,
            s3_endpoint_url=s3_endpoint,
            s3_access_key_id=ACCESS_KEY,
            s3_secret_access_key=SECRET_KEY,
            s3_prefix="p/",
        )
    )
    key = "xfr_" + "0" * 32 + "/7"
    put = urlsplit(store.upload_url(key, size=1234, now=100, expires_at=400))
    query = {name: values[0] for name, values in parse_qs(put.query).items()}
    assert put.path == f"/{BUCKET}/p/{key}"
    assert query["X-Amz-SignedHeaders"].split(";") == ["content-length", "host"]
    assert query["X-Amz-Expires"] == "300"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    get = urlsplit(store.download_url(key, size=1234, now=100, expires_at=160))
    get_query = {name: values[0] for name, values in parse_qs(get.query).items()}
    assert get_query["X-Amz-Expires"] == "60"
    assert get_query["X-Amz-Signature"] != query["X-Amz-Signature"]  # the method is signed
