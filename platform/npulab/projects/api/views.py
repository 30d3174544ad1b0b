"""Projects, their members and the pools, through the API.

Anyone may list the projects they have a role in; operators create projects
and pools; a project's owners add, change and remove its members. Managing
is a person's act: a token needs the admin scope for it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.accounts.models import Scope
from npulab.accounts.permissions import HasTokenScope
from npulab.accounts.roles import IsOperator
from npulab.projects.api.serializers import (
    MemberAddSerializer,
    MemberChangeSerializer,
    MembershipSerializer,
    PoolSerializer,
    ProjectDetailSerializer,
    ProjectSerializer,
)
from npulab.projects.models import Membership, Pool, Project
from npulab.projects.selectors import project_for, visible_projects
from npulab.projects.services import (
    do_add_member,
    do_change_member,
    do_create_pool,
    do_create_project,
    do_remove_member,
)

Role = Membership.Role
# What needs which scope: reading needs read; creating and managing, admin.
MANAGING = {"POST": Scope.ADMIN, "PATCH": Scope.ADMIN, "DELETE": Scope.ADMIN}


class ProjectViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Projects: the runs they group and who may read them, submit to them, manage them."""

    serializer_class = ProjectSerializer
    queryset = Project.objects.none()  # for the schema; get_queryset serves requests
    lookup_field = "slug"
    filter_backends: list[Any] = []
    token_scope = MANAGING

    def get_queryset(self) -> QuerySet[Project]:
        return visible_projects(self.request.user).prefetch_related("pools")

    def get_serializer_class(self) -> type[ProjectSerializer]:
        return ProjectDetailSerializer if self.action == "retrieve" else ProjectSerializer

    def get_permissions(self) -> list[Any]:
        if self.action == "create":
            return [HasTokenScope(), IsOperator()]
        return super().get_permissions()

    @extend_schema(request=ProjectSerializer, responses={201: ProjectDetailSerializer})
    def create(self, request: Request) -> Response:
        """Make a project on the pools named (operators); its maker is its first owner."""
        data = ProjectSerializer(data=request.data, context=self.get_serializer_context())
        data.is_valid(raise_exception=True)
        project = do_create_project(
            request.user,
            slug=data.validated_data["slug"],
            name=data.validated_data["name"],
            description=data.validated_data.get("description", ""),
            pools=data.validated_data.get("pools", []),
        )
        body = ProjectDetailSerializer(project, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(methods=["GET"], request=None, responses={200: MembershipSerializer(many=True)})
    @extend_schema(
        methods=["POST"], request=MemberAddSerializer, responses={201: MembershipSerializer}
    )
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def members(self, request: Request, slug: str) -> Response:
        """GET: who is in the project, with their roles. POST: add a user (owners)."""
        if request.method == "GET":
            project = project_for(request.user, slug)
            memberships = project.memberships.select_related("user")
            return Response(MembershipSerializer(memberships, many=True).data)
        project = project_for(request.user, slug, Role.OWNER)
        data = MemberAddSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = do_add_member(
            project, data.validated_data["user"], data.validated_data["role"], by=request.user
        )
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)


class ProjectMemberView(APIView):
    """One member of a project: change their role, or take them out (the project's owners)."""

    token_scope = MANAGING

    def _membership(self, request: Request, slug: str, username: str) -> Membership:
        project = project_for(request.user, slug, Role.OWNER)
        return get_object_or_404(
            Membership.objects.select_related("user", "project"),
            project=project,
            user__username=username,
        )

    @extend_schema(request=MemberChangeSerializer, responses={200: MembershipSerializer})
    def patch(self, request: Request, slug: str, username: str) -> Response:
        """Change the member's role; the last owner cannot stop being one."""
        membership = self._membership(request, slug, username)
        data = MemberChangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = do_change_member(membership, data.validated_data["role"], by=request.user)
        return Response(MembershipSerializer(membership).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, slug: str, username: str) -> Response:
        """Take the member out of the project; never its last owner."""
        do_remove_member(self._membership(request, slug, username), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PoolViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Pools: sets of hosts that projects may place runs on (operators make them)."""

    serializer_class = PoolSerializer
    queryset = Pool.objects.prefetch_related("hosts", "projects")
    lookup_field = "name"
    filter_backends: list[Any] = []
    token_scope = MANAGING

    def get_permissions(self) -> list[Any]:
        if self.action == "create":
            return [HasTokenScope(), IsOperator()]
        return super().get_permissions()

    def perform_create(self, serializer: PoolSerializer) -> None:
        serializer.instance = do_create_pool(
            self.request.user,
            name=serializer.validated_data["name"],
            description=serializer.validated_data.get("description", ""),
        )
