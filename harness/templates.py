"""Migrated databases to copy: a stack's fresh database starts as a copy of one.

Migrating a fresh database and making its user took 10 to 15 s of a stack's start on a
loaded 2-core machine, and a test session starts a dozen stacks. The first stack to need
it migrates a template (PostgreSQL: a database ``npulab_tmpl_<key>``; SQLite: a file in
the temporary directory) and every stack after it copies that (``CREATE DATABASE ...
TEMPLATE``, a file copy). The key is a digest of every migration (those of the kinds in
``NPULAB_KINDS`` too: the tests' echo kind has a table) and of the superuser's settings,
so a changed migration, or another set of kinds, makes a new template; of processes
needing a missing one at once, one builds it (under a lock) and the others copy it.
``copy_migrated`` replaces only a database with no tables: a stack launched again on its
database keeps what it holds. ``replace_with_migrated`` replaces any (the test database of
pytest-django, tests/conftest.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from workers.contract.kinds import EXTRA_KINDS_ENV

REPO_DIR = Path(__file__).resolve().parent.parent
MIGRATIONS = "platform/npulab/*/migrations/*.py"
PREFIX = "npulab_tmpl_"


def key(env: dict[str, str]) -> str:
    digest = hashlib.sha256()
    paths = sorted(REPO_DIR.glob(MIGRATIONS))
    # The kinds named in NPULAB_KINDS are apps with tables of their own: the tests' stacks
    # have the echo kind's, a benchmark's has none, and each must copy a template like it.
    for module in env.get(EXTRA_KINDS_ENV, "").split(","):
        if module.strip():
            folder = REPO_DIR.joinpath(*module.strip().split("."), "migrations")
            paths += sorted(folder.glob("*.py"))
    for path in paths:
        digest.update(str(path.relative_to(REPO_DIR)).encode())
        digest.update(path.read_bytes())
    for name in ("DJANGO_SUPERUSER_USERNAME", "DJANGO_SUPERUSER_PASSWORD", EXTRA_KINDS_ENV):
        digest.update(env.get(name, "").encode())
    return digest.hexdigest()[:16]


def copy_migrated(env: dict[str, str], prepare: Callable[[dict[str, str]], None]) -> bool:
    """Make the empty database of ``env["DATABASE_URL"]`` a copy of the migrated template,
    building the template first with ``prepare(env of the template)`` where there is none.
    False, touching nothing, where the database already has tables."""
    url = env["DATABASE_URL"]
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        if path.exists() and path.stat().st_size:
            return False
    elif _has_tables(url):
        return False
    replace_with_migrated(env, prepare)
    return True


def replace_with_migrated(env: dict[str, str], prepare: Callable[[dict[str, str]], None]) -> None:
    """Make the database of ``env["DATABASE_URL"]`` anew, whatever it held, as a copy of the
    migrated template (built first with ``prepare`` where there is none)."""
    url = env["DATABASE_URL"]
    if url.startswith("sqlite:///"):
        _sqlite(Path(url[len("sqlite:///") :]), env, prepare)
    else:
        _postgres(url, env, prepare)


def _sqlite(path: Path, env: dict[str, str], prepare: Callable[[dict[str, str]], None]) -> None:
    template = Path(tempfile.gettempdir()) / f"{PREFIX}{key(env)}.sqlite3"
    # One process builds a missing template; the others wait for it, then copy it.
    with open(template.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            building = template.with_name(f"{template.stem}.{os.getpid()}.building")
            building.unlink(missing_ok=True)
            prepare({**env, "DATABASE_URL": f"sqlite:///{building}"})
            os.replace(building, template)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, path)


def _has_tables(url: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        return bool(
            connection.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone()[0]
        )


def _postgres(url: str, env: dict[str, str], prepare: Callable[[dict[str, str]], None]) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    template = f"{PREFIX}{key(env)}"
    with psycopg.connect(admin, autocommit=True) as connection:
        # One process builds a missing template (a session's lock, released if it dies);
        # the others wait for it, then copy it: on a fresh server the test processes and
        # the first stacks all start at once, and each migrated a template of its own.
        connection.execute("SELECT pg_advisory_lock(hashtext(%s))", (template,))
        try:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (template,)
            ).fetchone()
            if not exists:
                # Built under a name of its own: a build that fails leaves no template.
                building = f"{template}_{os.getpid()}"
                connection.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
                connection.execute(f'CREATE DATABASE "{building}"')
                try:
                    prepare({**env, "DATABASE_URL": parts._replace(path=f"/{building}").geturl()})
                    connection.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')
                finally:
                    connection.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
        finally:
            connection.execute("SELECT pg_advisory_unlock(hashtext(%s))", (template,))
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
