"""The ``npulab`` command line: runs, hosts, snapshots, reviews and comparisons over REST.

It talks to the platform's user API only (``/api/v1/``, a user token), never
imports Django or ``npulab``, and exits with the codes CI gates on
(``workers.contract.exits``); docs/cli.md describes it.
"""
