"""Training on a host: the entry-point launcher and the built-in reference jobs."""
