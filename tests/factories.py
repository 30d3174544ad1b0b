"""factory_boy factories for the models tests build on."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from npulab.hosts.models import Host
from npulab.projects.models import default_project
from npulab.runs.models import Run
from workers.contract.kinds import validate


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-only")


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
