"""The host worker: ``python -m workers`` on each accelerator host.

It registers the host with the platform, heartbeats, consumes the host's
Celery queue and executes each run as a ``workers.run`` subprocess in the
run's interpreter, forwarding its events.jsonl over the REST API.
"""
