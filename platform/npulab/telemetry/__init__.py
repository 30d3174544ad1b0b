"""Device telemetry from the host workers: samples, their series and retention."""
