"""The MLflow tracking API a run's script talks to: served by the supervisor on 127.0.0.1.

``MlflowServer`` answers the REST calls MLflow's client makes (workers.contract.mlflow
routes and checks them) and turns each one that logs into events of the run's
events.jsonl (``EventsStore``): metrics with ``source`` ``mlflow``, ``param`` and ``tag``
events, a line on the run's log for a run started or ended, and the files written under
the ``file://`` artifact URI as artifacts. Standard library only.
"""

from workers.capture.mlflow.server import MlflowServer
from workers.capture.mlflow.store import EventsStore

__all__ = ["EventsStore", "MlflowServer"]
