"""``manage.py users``: list people, add one with a role, change a role, (de)activate."""

from __future__ import annotations

import getpass
import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from npulab.accounts.users import (
    ROLES,
    USER,
    UserInvalid,
    do_create_user,
    do_set_user_active,
    do_set_user_role,
    role_of,
)

PASSWORD_ENV = "NPULAB_USER_PASSWORD"  # noqa: S105 - the variable's name


class Command(BaseCommand):
    help = (
        "Manage people: 'list'; 'add NAME --role user|operator|admin' (password asked, or "
        f"{PASSWORD_ENV}); 'role NAME ROLE'; 'deactivate NAME'; 'activate NAME'. A "
        "project's roles (viewer, member, owner) are set on its page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="every user with their role")
        add = sub.add_parser("add", help="a new user")
        add.add_argument("username")
        add.add_argument("--role", choices=ROLES, default=USER)
        add.add_argument("--email", default="")
        role = sub.add_parser("role", help="change a user's platform role")
        role.add_argument("username")
        role.add_argument("role", choices=ROLES)
        for name in ("activate", "deactivate"):
            sub.add_parser(name, help=f"{name} a user").add_argument("username")

    def handle(self, *args, action: str, **options) -> None:
        try:
            if action == "list":
                self._list()
            elif action == "add":
                password = os.environ.get(PASSWORD_ENV) or getpass.getpass("Password: ")
                user = do_create_user(
                    options["username"], password, options["role"], options["email"]
                )
                self.stdout.write(f"{user.username}: {role_of(user)}")
            else:
                user = get_user_model().objects.filter(username=options["username"]).first()
                if user is None:
                    raise CommandError(f"no user {options['username']!r}")
                if action == "role":
                    do_set_user_role(user, options["role"])
                else:
                    do_set_user_active(user, action == "activate")
                self.stdout.write(f"{user.username}: {role_of(user)}, active {user.is_active}")
        except UserInvalid as exc:
            raise CommandError(str(exc)) from None

    def _list(self) -> None:
        for user in get_user_model().objects.order_by("username"):
            active = "" if user.is_active else " (inactive)"
            self.stdout.write(f"{user.username:<24} {role_of(user)}{active}")
