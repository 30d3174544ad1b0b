"""Projects group runs and say who may see them; pools group the hosts projects may use."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse

# Slugs appear in URLs and on the command line (npulab submit --project SLUG).
SLUG_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
slug_validator = RegexValidator(
    SLUG_PATTERN,
    "Use 1-63 lower-case letters, digits, '-' or '_', starting with a letter or digit.",
)
# What every site has from its first migration: hosts, runs and users land here unless
# someone says otherwise, so a single-user install needs no setup.
DEFAULT_POOL = "default"
DEFAULT_PROJECT = "default"


class Pool(models.Model):
    """A set of hosts; a project's runs are placed only on hosts of its pools."""

    name = models.CharField(max_length=63, unique=True, validators=[slug_validator])
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    """A group of runs and the people who may read them, submit to it and manage it."""

    slug = models.CharField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    pools = models.ManyToManyField(
        Pool,
        blank=True,
        related_name="projects",
        help_text="The pools whose hosts this project's runs may be placed on.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("projects:project_detail", args=[self.slug])


class Membership(models.Model):
    """A user's role in a project."""

    class Role(models.TextChoices):
        # In rising order of what the role may do; each may do what those before it may.
        VIEWER = "viewer", "Viewer: reads the project's runs"
        MEMBER = "member", "Member: also submits, cancels and restarts runs"
        OWNER = "owner", "Owner: also manages the members"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="project_memberships"
    )
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


ROLE_RANK = {Membership.Role.VIEWER: 1, Membership.Role.MEMBER: 2, Membership.Role.OWNER: 3}


def role_at_least(role: str | None, wanted: str) -> bool:
    """Whether ``role`` (None: no role) may do what ``wanted`` may."""
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[wanted]


def default_pool() -> Pool:
    """The default pool, made again if someone deleted it."""
    pool, _ = Pool.objects.get_or_create(
        name=DEFAULT_POOL, defaults={"description": "Every host, unless an operator moves it."}
    )
    return pool


def default_project() -> Project:
    """The default project (on the default pool), made again if someone deleted it."""
    project, created = Project.objects.get_or_create(
        slug=DEFAULT_PROJECT,
        defaults={"name": "Default", "description": "Runs submitted without a project."},
    )
    if created:
        project.pools.add(default_pool())
    return project


# Field defaults: a key, looked up by key only, so a migration that runs them against an
# older table reads no column it may lack.
def default_pool_pk() -> int:
    found = Pool.objects.filter(name=DEFAULT_POOL).values_list("pk", flat=True).first()
    return found if found is not None else default_pool().pk


def default_project_pk() -> int:
    """Migration runs 0012's default: the project the runs that existed then went to."""
    found = Project.objects.filter(slug=DEFAULT_PROJECT).values_list("pk", flat=True).first()
    return found if found is not None else default_project().pk
