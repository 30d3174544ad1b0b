"""Run kinds, one folder each: ``<name>/__init__.py`` declares it, ``<name>/runner.py`` runs it.

The declaration (``KIND = Kind(...)``, see ``workers.contract.kinds``) holds
the kind's spec fields, its own exit causes and event types; it imports only
the standard library and ``workers.contract``, because the platform imports
it to validate submissions. The runner module has ``run(ctx: RunContext) ->
Outcome`` (``workers.kinds.base``) and executes in the child process that
``workers.run`` supervises, so a crash in an operator kills only that child.
"""
