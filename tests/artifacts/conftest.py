"""The artifact store under test: a local directory, or an S3 server the tests start (moto)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
CREDENTIALS = {"access_key": "testing", "secret_key": "testing"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3-compatible server on a free 127.0.0.1 port, for the whole session."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


class Store:
    """What a test asserts about the storage: every key it holds."""

    def __init__(self, name: str, keys: Any) -> None:
        self.name = name
        self._keys = keys

    def keys(self) -> list[str]:
        return sorted(self._keys())


@pytest.fixture
def local_store(settings: Any, tmp_path: Path) -> Store:
    root = tmp_path / "artifacts"
    settings.NPULAB = dict(settings.NPULAB, ARTIFACT_DIR=str(root))
    settings.STORAGES = dict(
        settings.STORAGES,
        artifacts={"BACKEND": "npulab.artifacts.storage.LocalArtifactStorage"},
    )

    def keys() -> list[str]:
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]

    return Store("local", keys)


@pytest.fixture
def s3_store(settings: Any, s3_endpoint: str) -> Store:
    """A fresh bucket on the moto server, as the artifacts storage."""
    bucket = f"npulab-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name=REGION,
        aws_access_key_id=CREDENTIALS["access_key"],
        aws_secret_access_key=CREDENTIALS["secret_key"],
    )
    client.create_bucket(Bucket=bucket)
    settings.STORAGES = dict(
        settings.STORAGES,
        artifacts={
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": s3_endpoint,
                "region_name": REGION,
                "querystring_auth": False,
                **CREDENTIALS,
            },
        },
    )

    def keys() -> list[str]:
        listing = client.list_objects_v2(Bucket=bucket)
        return [item["Key"] for item in listing.get("Contents", [])]

    return Store("s3", keys)


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest) -> Store:
    """Each test that takes it runs against both storages."""
    return request.getfixturevalue(f"{request.param}_store")
