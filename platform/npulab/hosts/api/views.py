from __future__ import annotations

from django.db.models import Count
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from npulab.accounts.models import Scope
from npulab.accounts.permissions import HasTokenScope
from npulab.accounts.roles import IsOperator
from npulab.hosts.api.serializers import HostSerializer
from npulab.hosts.models import Host
from npulab.hosts.services import do_move_host_to_pool
from npulab.projects.models import Pool


class HostPoolSerializer(serializers.Serializer):
    pool = serializers.SlugRelatedField(
        slug_field="name", queryset=Pool.objects.all(), help_text="The pool to move the host to."
    )


class HostViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Accelerator hosts and their devices."""

    queryset = Host.objects.select_related("pool").annotate(busy_devices=Count("leases"))
    serializer_class = HostSerializer
    lookup_field = "name"
    filterset_fields = ["device_type", "status", "enabled", "pool__name"]
    # The scope a token needs (npulab.accounts.permissions); actions set their own.
    token_scope: str | None = None

    @extend_schema(request=HostPoolSerializer, responses={200: HostSerializer})
    @action(
        detail=True,
        methods=["post"],
        permission_classes=[HasTokenScope, IsOperator],
        token_scope=Scope.ADMIN,
    )
    def pool(self, request: Request, name: str) -> Response:
        """Move the host to another pool (operators): only that pool's projects' runs go there."""
        host = get_object_or_404(Host, name=name)
        data = HostPoolSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        do_move_host_to_pool(host, data.validated_data["pool"], by=request.user)
        return Response(HostSerializer(self.get_object(), context={"request": request}).data)
