"""``python -m workers.cli`` is the ``npulab`` command."""

from workers.cli.main import main

main()
