"""People and their platform roles, managed by an admin in the browser and with manage.py."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError

from npulab.accounts.roles import OPERATORS_GROUP, is_operator
from npulab.accounts.users import do_set_user_role, role_of
from npulab.audit import actions
from npulab.audit.models import AuditEntry
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
STRONG = "a-long-passphrase-9271"


@pytest.fixture
def admin(db: None):
    return UserFactory(username="root-admin", is_superuser=True, is_staff=True)


def test_an_admin_adds_a_user_and_makes_them_an_operator_in_the_browser(client, admin) -> None:
    client.force_login(admin)
    page = client.get("/account/users/")
    assert page.status_code == 200
    added = client.post(
        "/account/users/", {"username": "ada", "password": STRONG, "role": "user", "email": ""}
    )
    assert added.status_code == 302
    ada = get_user_model().objects.get(username="ada")
    assert (role_of(ada), ada.check_password(STRONG)) == ("user", True)
    client.post(f"/account/users/{ada.pk}/", {"role": "operator", "active": "on"})
    ada.refresh_from_db()
    assert is_operator(ada)
    assert AuditEntry.objects.filter(action=actions.USER_SET_ROLE, target_id="ada").exists()
    client.post(f"/account/users/{ada.pk}/", {"role": "operator"})  # active unticked
    ada.refresh_from_db()
    assert not ada.is_active
    weak = client.post("/account/users/", {"username": "bob", "password": "bob", "role": "user"})
    assert weak.status_code == 200
    assert "too short" in weak.content.decode()


def test_an_operator_made_after_the_group_was_lost_holds_the_operator_permission(admin) -> None:
    # A flushed or hand-edited database: the group the health migration made is gone.
    Group.objects.filter(name=OPERATORS_GROUP).delete()
    ada = UserFactory(username="ada")
    do_set_user_role(ada, "operator", by=admin)
    ada = get_user_model().objects.get(pk=ada.pk)  # a fresh object: no cached permissions
    assert is_operator(ada)


def test_only_admins_manage_users(client, owner) -> None:
    client.force_login(owner)
    assert client.get("/account/users/").status_code == 403
    post = client.post("/account/users/", {"username": "x", "password": STRONG, "role": "admin"})
    assert post.status_code == 403
    assert not get_user_model().objects.filter(username="x").exists()


def test_the_users_command_adds_lists_and_changes_roles(monkeypatch, capsys) -> None:
    monkeypatch.setenv("NPULAB_USER_PASSWORD", STRONG)
    call_command("users", "add", "grace", "--role", "operator")
    call_command("users", "role", "grace", "admin")
    call_command("users", "deactivate", "grace")
    call_command("users", "list")
    out = capsys.readouterr().out
    assert "grace                    admin (inactive)" in out
    grace = get_user_model().objects.get(username="grace")
    assert grace.is_superuser
    assert not grace.is_active
    with pytest.raises(CommandError, match="'grace' is taken"):
        call_command("users", "add", "grace")
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("users", "role", "nobody", "user")
