"""What the telemetry store tells the apps above it, which it must not import."""

from django.dispatch import Signal

# Sent after a batch of samples is stored: ``host`` (a Host) and ``samples`` (the
# validated contract samples, oldest first). Host-health rules listen to it.
samples_recorded = Signal()
