"""Metrics an unmodified script reports: where a series came from, and the names both sides use.

A metric event may carry ``source``: ``track`` (workers.track, the default when absent),
``mlflow`` (the MLflow tracking API the supervisor serves), ``tensorboard`` (event files
read while the run runs) or ``stdout`` (lines the script prints). Two sources giving one
key are two series, told apart by their source. MLflow params and tags travel as ``param``
and ``tag`` events. docs/metrics.md describes it for users. Standard library only.
"""

from __future__ import annotations

TRACK, MLFLOW, TENSORBOARD, STDOUT = "track", "mlflow", "tensorboard", "stdout"
SOURCES = (TRACK, MLFLOW, TENSORBOARD, STDOUT)
# The field of a metric, param or tag event that names its source.
SOURCE_FIELD = "source"

PARAM, TAG = "param", "tag"

# Spec fields every kind accepts (workers.contract.spec.capture_fields).
TENSORBOARD_DIRS = "tensorboard_dirs"
METRIC_PATTERNS = "metric_patterns"
STDOUT_METRICS = "stdout_metrics"

# What the supervisor sets in the script's environment, as MLflow's client reads them.
MLFLOW_TRACKING_URI = "MLFLOW_TRACKING_URI"
MLFLOW_EXPERIMENT_NAME = "MLFLOW_EXPERIMENT_NAME"
MLFLOW_RUN_ID = "MLFLOW_RUN_ID"
# An outside client's npulab API token, sent by MLflow's client as a bearer token.
MLFLOW_TRACKING_TOKEN = "MLFLOW_TRACKING_TOKEN"  # noqa: S105 (a variable name)
# Where the platform serves the same API, under its root.
MLFLOW_PATH = "/mlflow/"

# Distinct keys the stdout recogniser takes in one run before it says so and stops adding.
MAX_STDOUT_KEYS = 100
# Distinct keys of all other captured sources in one run (1,000,000 keys must not flood).
MAX_CAPTURED_KEYS = 10000
MAX_KEY_CHARS = 200
