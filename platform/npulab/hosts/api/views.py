from __future__ import annotations

from django.db.models import Count
from rest_framework import mixins, viewsets

from npulab.hosts.api.serializers import HostSerializer
from npulab.hosts.models import Host


class HostViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Accelerator hosts and their devices."""

    queryset = Host.objects.annotate(busy_devices=Count("leases"))
    serializer_class = HostSerializer
    lookup_field = "name"
    filterset_fields = ["device_type", "status", "enabled"]
