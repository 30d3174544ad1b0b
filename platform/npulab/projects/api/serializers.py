from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import serializers

from npulab.projects.models import Membership, Pool, Project, slug_validator
from npulab.projects.selectors import role_in


class PoolSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:pool-detail", lookup_field="name")
    hosts = serializers.SerializerMethodField(help_text="The names of the pool's hosts.")
    projects = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)

    class Meta:
        model = Pool
        fields = ["name", "url", "description", "hosts", "projects", "created"]
        read_only_fields = ["url", "hosts", "projects", "created"]

    def get_hosts(self, pool: Pool) -> list[str]:
        # The hosts app sits above this one: its rows are reached by the reverse relation.
        return [host.name for host in pool.hosts.all()]


class MembershipSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Membership
        fields = ["user", "role", "created", "updated"]
        read_only_fields = fields


class MemberAddSerializer(serializers.Serializer):
    user = serializers.SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.filter(is_active=True),
        help_text="The username of who joins.",
    )
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class MemberChangeSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class ProjectSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:project-detail", lookup_field="slug")
    web_url = serializers.SerializerMethodField()
    pools = serializers.SlugRelatedField(
        slug_field="name",
        many=True,
        queryset=Pool.objects.all(),
        required=False,
        help_text="The pools whose hosts the project's runs may be placed on.",
    )
    role = serializers.SerializerMethodField(
        help_text="The caller's role here: owner, member or viewer (a superuser is owner)."
    )
    slug = serializers.CharField(max_length=63, validators=[slug_validator])

    class Meta:
        model = Project
        fields = ["slug", "url", "web_url", "name", "description", "pools", "role", "created"]
        read_only_fields = ["url", "web_url", "role", "created"]

    def get_web_url(self, project: Project) -> str:
        request = self.context.get("request")
        path = project.get_absolute_url()
        return request.build_absolute_uri(path) if request else path

    def get_role(self, project: Project) -> str | None:
        request = self.context.get("request")
        return role_in(request.user, project) if request else None

    def validate_slug(self, value: str) -> str:
        if Project.objects.filter(slug=value).exists():
            raise serializers.ValidationError(f"a project '{value}' exists already")
        return value


class ProjectDetailSerializer(ProjectSerializer):
    members = serializers.SerializerMethodField()

    class Meta(ProjectSerializer.Meta):
        fields = [*ProjectSerializer.Meta.fields, "members"]

    def get_members(self, project: Project) -> list[dict[str, Any]]:
        memberships = project.memberships.select_related("user")
        return MembershipSerializer(memberships, many=True).data
