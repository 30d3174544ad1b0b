"""``manage.py api_compat RELEASED [CURRENT]``: fail on a breaking change of the REST API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from npulab.core.schema_compat import breaking_changes


class Command(BaseCommand):
    help = (
        "Compare the OpenAPI schema (default: docs/openapi.yaml) with a released one; "
        "exit non-zero if a client of the release would break. Additions pass."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "released", help="the last release's schema, e.g. docs/api-releases/0.1.0.yaml"
        )
        parser.add_argument("current", nargs="?", default="docs/openapi.yaml")

    def handle(self, *args: Any, **options: Any) -> None:
        released, current = _load(options["released"]), _load(options["current"])
        problems = breaking_changes(released, current)
        if problems:
            raise CommandError(
                f"{len(problems)} breaking change(s) against {options['released']}:\n  "
                + "\n  ".join(problems)
            )
        self.stdout.write(f"{options['current']} is compatible with {options['released']}")


def _load(path: str) -> dict[str, Any]:
    try:
        return yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as error:
        raise CommandError(f"cannot read the schema {path}: {error}") from error
