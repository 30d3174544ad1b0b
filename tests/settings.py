"""Settings for the test run: the real ones, pointed at the services this machine has.

pytest-django loads this before any conftest, so the choice of services
(harness/services.py) is made here. The end-to-end stack's processes inherit
the same environment and load the real ``npulab.settings``.
"""

import os

from harness.services import detect

SERVICES = detect()
if SERVICES.database_url:
    os.environ["DATABASE_URL"] = SERVICES.database_url
os.environ.setdefault("NPULAB_SECRET_KEY", "tests-only-not-a-secret")
# The tests' PostgreSQL sessions, this process's and those of every process it starts (libpq
# reads PGOPTIONS), commit without waiting for the WAL to reach the disk. Only a crash of
# the server itself, which no test causes (the outage test cuts a proxy), could lose a test
# database's last commits; migrations and the flushes of transactional tests stop waiting on
# fsync (tests/runs/test_migrations.py: 58 s -> 27 s on a loaded 2-core machine).
os.environ.setdefault("PGOPTIONS", "-c synchronous_commit=off")
# Every run, runner and worker the tests start inherits this. Without it each torch process
# starts one BLAS/OpenMP thread per core: with pytest-xdist on a 2-core machine that is
# several processes spinning on the same cores, and a training test took ten times longer.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The pytest process itself publishes to kombu's in-memory transport, so a
# test can read exactly the messages it caused; the end-to-end stack gets a
# real Redis.
os.environ["NPULAB_BROKER_URL"] = "memory://"
# The test-only run kind, brought in as a site's own kind would be; the
# processes the tests start (runners, the e2e stack) see it too.
os.environ["NPULAB_KINDS"] = "tests.kinds.echo"
# Each pytest-xdist worker has a test database of its own, so ids repeat across workers: the
# files named by them (artifacts, profile work, a SQLite database) go in a var dir of its own.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    _VAR = os.environ.get("NPULAB_VAR_DIR") or os.path.join(os.path.dirname(__file__), "..", "var")
    os.environ["NPULAB_VAR_DIR"] = os.path.join(os.path.abspath(_VAR), "xdist", _WORKER)

from npulab.settings import *  # noqa: E402, F403

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A fresh clone has no var/ yet; SQLite will not create the folder.
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # noqa: F405

# The test users' passwords (tests/factories.py, logins in the page tests) are hashed with
# MD5, not PBKDF2's million rounds: 0.2 CPU-s a hash, for nothing the tests check. The
# end-to-end stacks load npulab.settings and hash as a deployment does.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
