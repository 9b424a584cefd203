"""A bucket the server reaches at one endpoint and devices at another (compose: MinIO on the compose
network for the server, the public host through Caddy for devices): the URLs devices get are signed
for the public endpoint, and the server lists and deletes at its own."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

import httpx

from core.adapters.storage.s3 import S3ObjectStore
from core.settings import explicit_settings
from tests.contracts.test_object_stores import ACCESS_KEY, BUCKET, SECRET_KEY, s3_client, s3_endpoint

__all__ = ["s3_endpoint"]  # the session's moto server, a fixture of test_object_stores.py

PUBLIC = "https://relay.example.org"


def test_urls_are_signed_for_the_public_endpoint_and_deletes_go_to_the_servers(s3_endpoint: str) -> None:
    prefix = f"run-{secrets.token_hex(4)}/"
    store = S3ObjectStore.from_settings(
        explicit_settings(
            s3_bucket=BUCKET,
            s3_endpoint_url=s3_endpoint,
            s3_public_endpoint_url=PUBLIC,
            s3_access_key_id=ACCESS_KEY,
            s3_secret_access_key=SECRET_KEY,
            s3_prefix=prefix,
        )
    )
    transfer = f"xfr_{secrets.token_hex(16)}"
    upload = urlsplit(store.upload_url(f"{transfer}/0", size=3, now=1000, expires_at=1900))
    download = urlsplit(store.download_url(f"{transfer}/0", size=3, now=1000, expires_at=1900))
    for url in (upload, download):
        assert f"{url.scheme}://{url.netloc}" == PUBLIC
        assert url.path == f"/{BUCKET}/{prefix}{transfer}/0"  # path style: one host, the bucket's path
        assert "X-Amz-Signature=" in url.query

    # An object where the URL puts it (moto checks no signature: the Caddy route under a real SigV4
    # check was run by hand, docs/operations.md), then deleted at the server's own endpoint.
    internal = f"{s3_endpoint}{upload.path}?{upload.query}"
    assert httpx.put(internal, content=b"abc", timeout=10).is_success
    client = s3_client(s3_endpoint)
    assert client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + transfer)["KeyCount"] == 1
    store.delete_transfer(transfer)  # the public endpoint is not reachable here: this went to moto
    assert client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + transfer)["KeyCount"] == 0
