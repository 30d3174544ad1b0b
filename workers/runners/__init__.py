"""One module per run kind; ``workers.spec.KINDS`` names which.

A runner module has ``run(ctx: RunContext) -> Outcome``. It executes in the
child process that ``workers.run`` supervises, so a crash in an operator
kills only that child.
"""
