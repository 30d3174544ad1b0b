"""``manage.py resummarise_profiles [--dry-run]``: after an upgrade, ask again for the
summary and index of every ready profile an older npulab summarised.

A summary's ``version`` says which rules made it (docs/profiles.md); a newer npulab may
count differently, and a compare of two profiles is only fair with both made alike. The
control worker does the work, one profile at a time, as for a new trace.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from npulab.profiles.services import do_resummarise_profile, outdated_profiles
from npulab.profiles.summary import SUMMARY_VERSION


class Command(BaseCommand):
    help = "Summarise again every ready profile an older npulab summarised."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="only list them; ask for nothing"
        )

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        outdated = list(outdated_profiles().only("pk", "run_id", "name"))
        for profile in outdated:
            self.stdout.write(f"profile {profile.pk} (run {profile.run_id}, {profile.name})")
            if not dry_run:
                do_resummarise_profile(profile)
        verb = "would be" if dry_run else "were"
        self.stdout.write(
            f"{len(outdated)} profile(s) summarised by an older npulab {verb} asked for "
            f"again (this one's summaries are version {SUMMARY_VERSION})"
        )
