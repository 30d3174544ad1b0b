"""What the artifact store tells the apps above it, which it may not import.

``artifact_stored`` is sent (inside the transaction that stores it) with ``artifact=`` once
an artifact's bytes are in and verified: the profiles app makes a trace's profile from it.
"""

from __future__ import annotations

from django.dispatch import Signal

artifact_stored = Signal()
