"""The end-to-end platform fixture (tests/e2e/platform.py) on the services the tests use."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from npulab.core import stack
from tests.e2e.platform import Platform, create_postgres_database
from tests.services import in_ci


@pytest.fixture(scope="session")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    var_dir = tmp_path_factory.mktemp("e2e")
    services = settings.SERVICES
    if services.database_url:
        database_url, drop_database = create_postgres_database(
            services.database_url, f"npulab_e2e_{os.getpid()}"
        )
    else:
        database_url, drop_database = f"sqlite:///{var_dir / 'e2e.sqlite3'}", None
    embedded = None
    if services.redis_url:
        broker_url = services.redis_url
        redis.Redis.from_url(broker_url).flushdb()  # its own db: queues of earlier runs
    else:
        embedded = stack.EmbeddedRedis(var_dir / "redis", lambda name, line: None)
        embedded.start()
        broker_url = embedded.url
    platform = Platform(var_dir, database_url, broker_url)
    try:
        yield platform.launch()
    finally:
        platform.shutdown()
        if embedded is not None:
            embedded.stop()
        if drop_database is not None:
            drop_database()


def chromium_path() -> str | None:
    return os.environ.get("NPULAB_CHROMIUM") or shutil.which("chromium")


def require(condition: bool, reason: str) -> None:
    """Skip for a missing tool or service, except under CI=true, where it is a failure."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)
