"""What the tests and the benchmarks share, and nothing of either.

``services`` finds the PostgreSQL and Redis this machine has (or says to embed
SQLite and Redis); ``stack`` starts the platform as real processes (web,
control worker, host worker) and stops them, on a database ``templates`` copies from
a migrated one, running its management commands in one Django start-up (``commands``);
``traces`` writes synthetic profiler traces; ``polling`` paces the
waits on a stack. bench/ imports these, never tests/ (a test checks).
"""
