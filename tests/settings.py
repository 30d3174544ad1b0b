"""Settings for the test run: the real ones, pointed at the services this machine has.

pytest-django loads this before any conftest, so the choice of services
(tests/services.py) is made here. The end-to-end stack's processes inherit
the same environment and load the real ``npulab.settings``.
"""

import os

from tests.services import detect

SERVICES = detect()
if SERVICES.database_url:
    os.environ["DATABASE_URL"] = SERVICES.database_url
os.environ.setdefault("NPULAB_SECRET_KEY", "tests-only-not-a-secret")
# The pytest process itself publishes to kombu's in-memory transport, so a
# test can read exactly the messages it caused; the end-to-end stack gets a
# real Redis.
os.environ["NPULAB_BROKER_URL"] = "memory://"
# The test-only run kind, brought in as a site's own kind would be; the
# processes the tests start (runners, the e2e stack) see it too.
os.environ["NPULAB_KINDS"] = "tests.kinds.echo"

from npulab.settings import *  # noqa: E402, F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.kinds.echo"]  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A fresh clone has no var/ yet; SQLite will not create the folder.
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # noqa: F405
