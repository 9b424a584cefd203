"""An S3-compatible bucket as the object store (AWS S3, MinIO, Ceph, R2, ...), through boto3.

Presigned URLs are SigV4 query signatures made locally (no request to the bucket): a PUT URL signs
the method, the object key and its ``Content-Length``, so the bucket refuses another size
(``SignatureDoesNotMatch``); every URL carries its lifetime (``X-Amz-Expires``). Objects live
under ``<prefix><transfer_id>/<index>``; deleting a transfer lists its prefix and deletes in
batches. A bucket lifecycle rule expiring that prefix after a day is a good safety net.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from core.adapters.storage.base import TRANSFER_ID
from core.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

DELETE_BATCH = 1000  # the most keys one DeleteObjects call takes


class S3ObjectStore:
    """``client`` lists and deletes; ``presigner`` (``client`` unless given) signs the URLs devices
    use, for a bucket they reach at another endpoint than the server does."""

    def __init__(
        self, client: S3Client, bucket: str, prefix: str = "", *, presigner: S3Client | None = None
    ) -> None:
        self._client = client
        self._presigner = presigner or client
        self._bucket = bucket
        self._prefix = prefix

    @classmethod
    def from_settings(cls, settings: Settings) -> S3ObjectStore:
        secret = settings.s3_secret_access_key.get_secret_value() if settings.s3_secret_access_key else None
        config = Config(
            signature_version="s3v4",
            # Custom endpoints (MinIO, a local server) rarely resolve virtual-hosted bucket names.
            s3={"addressing_style": "path" if settings.s3_endpoint_url else "auto"},
            connect_timeout=5,
            read_timeout=30,
            retries={"max_attempts": 3, "mode": "standard"},
        )

        def client(endpoint_url: str | None) -> S3Client:
            return boto3.client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=settings.s3_region,
                aws_access_key_id=settings.s3_access_key_id,
                aws_secret_access_key=secret,
                config=config,
            )

        assert settings.s3_bucket is not None
        public = settings.s3_public_endpoint_url
        return cls(
            client(settings.s3_endpoint_url),
            settings.s3_bucket,
            settings.s3_prefix,
            presigner=client(public) if public else None,
        )

    def upload_url(self, key: str, *, size: int, now: int, expires_at: int) -> str:
        params = {"Bucket": self._bucket, "Key": self._prefix + key, "ContentLength": size}
        return self._presigner.generate_presigned_url(
            "put_object", Params=params, ExpiresIn=max(1, expires_at - now), HttpMethod="PUT"
        )

    def download_url(self, key: str, *, size: int, now: int, expires_at: int) -> str:
        params = {"Bucket": self._bucket, "Key": self._prefix + key}
        return self._presigner.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=max(1, expires_at - now), HttpMethod="GET"
        )

    def delete_transfer(self, transfer_id: str) -> None:
        if not TRANSFER_ID.fullmatch(transfer_id):
            raise ValueError("not a transfer id")
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=f"{self._prefix}{transfer_id}/"
        )
        keys = [item["Key"] for page in pages for item in page.get("Contents", []) if "Key" in item]
        for start in range(0, len(keys), DELETE_BATCH):
            batch: list[ObjectIdentifierTypeDef] = [
                {"Key": key} for key in keys[start : start + DELETE_BATCH]
            ]
            self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True})
