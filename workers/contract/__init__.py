"""What the platform and the hosts must agree on, written once.

Spec schema and validation (``spec``), the run kinds' declarations
(``kinds``), event types and their fields (``events``), exit causes and
process exit codes (``exits``), Celery task and queue names (``tasks``),
device types and their visible-devices variables (``devices``), the
environment a run's processes get (``script_env``), secret
redaction (``redact``) and the torch_npu / CANN compatibility data
(``compat``).

The web imports nothing else from ``workers`` (an import-linter contract
holds it to that), the host worker, the runners and the ``npulab`` CLI import
these names instead of spelling them again. Standard library only, Python 3.8.
"""
