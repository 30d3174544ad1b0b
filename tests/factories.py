"""factory_boy factories for the models tests build on."""

from __future__ import annotations

from functools import cache

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from npulab.hosts.models import Host
from npulab.projects.models import default_project
from npulab.runs.models import Run
from workers.contract.kinds import validate


@cache
def _hashed(password: str) -> str:
    """One real hash per password for the whole run: the default hasher (PBKDF2) costs a
    quarter of a CPU-second each time, paid by every test that makes a user. Logins still
    check it as they would any hash, in this process and in the stacks it starts."""
    return make_password(password)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-only", transform=_hashed)


class HostFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Host

    name = factory.Sequence(lambda n: f"host-{n:02d}")


class RunFactory(factory.django.DjangoModelFactory):
    """A queued smoke run; pass ``spec__…`` keys through ``spec=``."""

    class Meta:
        model = Run

    spec = factory.LazyFunction(lambda: validate({"kind": "smoke", "device_type": "cpu"}))
    kind = factory.LazyAttribute(lambda run: run.spec["kind"])
    device_type = factory.LazyAttribute(lambda run: run.spec["device_type"])
    devices = factory.LazyAttribute(lambda run: run.spec["devices"])
    submitted_by = factory.SubFactory(UserFactory)
    project = factory.LazyFunction(default_project)
