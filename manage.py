#!/usr/bin/env python
"""Django's command-line utility for npulab."""

import os
import sys
from pathlib import Path

# platform/ is a source root, not a package: a package named `platform`
# would shadow the standard library module of that name.
sys.path.insert(0, str(Path(__file__).resolve().parent / "platform"))


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
