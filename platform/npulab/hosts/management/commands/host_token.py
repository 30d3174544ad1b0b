from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from npulab.hosts.models import Host
from npulab.hosts.services import do_create_host, do_issue_host_token


class Command(BaseCommand):
    help = (
        "Print a new token for host NAME's worker, creating the host if needed. "
        "Any earlier token of the host stops working."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--labels", default="", help="comma-separated labels for a new host")

    def handle(self, *args, name: str, labels: str, **options) -> None:
        host = Host.objects.filter(name=name).first()
        if host is None:
            try:
                host = do_create_host(name, [x.strip() for x in labels.split(",") if x.strip()])
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(do_issue_host_token(host))
