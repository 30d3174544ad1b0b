"""What host workers send and get back: the agent API's bodies."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from npulab.core.converters import MAX_ID
from npulab.core.fields import TextField
from npulab.core.text import storable_json
from npulab.hosts.models import DeviceType
from workers.contract.gang import RUN_NETWORKS

MAX_DEVICES_PER_HOST = 1024
# npu-smi prints a chip's SDID and super pod id as unsigned 32-bit numbers.
MAX_UINT32 = 2**32 - 1
# A signed 64-bit column's bound: byte offsets; process exit codes are 32-bit.
MAX_OFFSET = 2**63 - 1
EXIT_CODES = (-(2**31), 2**31 - 1)
# 9999-12-31T23:59:59Z, the last moment a datetime holds.
MAX_TIMESTAMP = 253402300799.0


# -- registration and heartbeats ------------------------------------------


class DeviceSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=0, max_value=MAX_DEVICES_PER_HOST)
    name = TextField(allow_blank=True, max_length=200)
    phy_id = serializers.IntegerField(
        min_value=0,
        max_value=MAX_UINT32,
        required=False,
        help_text="The device's physical id (npu-smi info -m: Atlas A3, Ascend 950), which "
        "hccn_tool -i and a rank table's device_id take; absent where npu-smi prints none, "
        "and the index stands for it.",
    )
    sdid = serializers.IntegerField(
        min_value=0,
        max_value=MAX_UINT32,
        required=False,
        help_text="Atlas A3: the chip's SDID in its super pod (npu-smi info -t spod-info), "
        "its super_device_id in a rank table of version 1.2.",
    )
    super_pod_id = serializers.IntegerField(
        min_value=0,
        max_value=MAX_UINT32,
        required=False,
        help_text="Atlas A3: the super pod the chip sits in (npu-smi info -t spod-info).",
    )

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # Keep what the worker knows beyond index and name (NPU id, memory ...).
        value = super().to_internal_value(data)
        # What PostgreSQL's jsonb refuses (NUL, lone surrogates) is made storable.
        extra = {key: item for key, item in data.items() if key not in value}
        extra = storable_json(extra)
        return {**extra, **value}


class NetworkSerializer(serializers.Serializer):
    """A host's addresses for runs across hosts (docs/multihost.md)."""

    advertise_address = TextField(max_length=255, allow_blank=True, required=False)
    hccl_if_ip = TextField(max_length=64, allow_blank=True, required=False)
    hccl_socket_ifname = TextField(max_length=64, allow_blank=True, required=False)
    hccl_connect_timeout = serializers.IntegerField(min_value=120, max_value=7200, required=False)
    run_network = serializers.ChoiceField(
        choices=RUN_NETWORKS,
        required=False,
        help_text="none: the host keeps its runs off the network, so it takes no run across hosts.",
    )


class RegisterSerializer(serializers.Serializer):
    """What a host worker reports about its host when it starts."""

    device_type = serializers.ChoiceField(choices=DeviceType.choices)
    devices = DeviceSerializer(many=True, max_length=MAX_DEVICES_PER_HOST)
    labels = serializers.ListField(child=TextField(max_length=64), max_length=50, required=False)
    hostname = TextField(max_length=255, allow_blank=True, required=False)
    worker_version = TextField(max_length=32, allow_blank=True, required=False)
    python = TextField(max_length=32, allow_blank=True, required=False)
    run_python = TextField(max_length=500, allow_blank=True, required=False)
    platform = TextField(max_length=255, allow_blank=True, required=False)
    network = NetworkSerializer(
        required=False, help_text="How other hosts reach this one (the worker's config)."
    )

    def validate_devices(self, devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        indices = [device["index"] for device in devices]
        if sorted(indices) != list(range(len(devices))):
            raise serializers.ValidationError(
                "devices must be numbered 0..n-1 by their logical index, each once"
            )
        return sorted(devices, key=lambda device: device["index"])


class RegisterReplySerializer(serializers.Serializer):
    name = serializers.CharField()
    queue = serializers.CharField(help_text="The Celery queue to consume.")


class HeartbeatSerializer(serializers.Serializer):
    running = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID), max_length=10000
    )


class HeartbeatReplySerializer(serializers.Serializer):
    cancel = serializers.ListField(
        child=serializers.IntegerField(), help_text="Runs of this host to stop."
    )
    snapshot = serializers.BooleanField(help_text="Send an environment snapshot now.")


# -- runs -----------------------------------------------------------------


class AttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


class ResumeSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField()


class ClaimReplySerializer(serializers.Serializer):
    run = serializers.IntegerField()
    attempt = serializers.IntegerField()
    spec = serializers.JSONField(
        help_text="The run's spec, unredacted: the host needs its env. A placement apart's "
        "device_type is its own."
    )
    devices = serializers.ListField(child=serializers.IntegerField())
    gang = serializers.JSONField(
        help_text="The rendezvous and this host's ranks: hosts, node_rank, first_rank, "
        "local_world_size, world_size, master_addr, master_port, peers; on NPU hccl and "
        "rank_table (docs/multihost.md). Placements apart (a parity run's sides on hosts of "
        "their own) get hosts, node_rank, role, rendezvous: false and no rendezvous."
    )
    resume = ResumeSerializer(
        allow_null=True, help_text="The stored checkpoint a new attempt resumes from, if any."
    )
    max_events = serializers.IntegerField(
        help_text="The most events one events batch may hold here (NPULAB_MAX_EVENTS_PER_BATCH)."
    )


class PassThroughField(serializers.JSONField):
    """Parsed JSON taken as it is.

    DRF's JSONField re-encodes its value to prove it is JSON; a value that
    came out of the request's JSON parser is, and re-encoding 10,000 events
    costs as much as storing them.
    """

    def to_internal_value(self, data: Any) -> Any:
        return data


@extend_schema_field({"type": "array", "items": {}})
class JSONListField(PassThroughField):
    """A JSON list, taken as it is; the serializer checks it as a whole."""


@extend_schema_field({"type": "object", "additionalProperties": {}})
class JSONObjectField(serializers.JSONField):
    """A JSON object (its content is checked where it is used)."""


class EventBatchSerializer(AttemptSerializer):
    start = serializers.IntegerField(
        min_value=0, max_value=MAX_OFFSET, help_text="Byte offset of the first event."
    )
    end = serializers.IntegerField(
        min_value=0, max_value=MAX_OFFSET, help_text="Byte offset just past the last event."
    )
    # Checked as a whole, not item by item: a batch holds thousands of events.
    events = JSONListField(help_text="The events, as in events.jsonl.")

    def validate_events(self, value: Any) -> list[Any]:
        limit = self.context["max_events"]
        if not isinstance(value, list):
            raise serializers.ValidationError("must be a list of events")
        if len(value) > limit:
            raise serializers.ValidationError(f"at most {limit} events a batch")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["end"] < attrs["start"]:
            raise serializers.ValidationError({"end": "must not be before start"})
        if attrs["events"] and attrs["end"] == attrs["start"]:
            raise serializers.ValidationError({"end": "a batch with events must advance"})
        return attrs


class EventAckSerializer(serializers.Serializer):
    ack = serializers.IntegerField(help_text="Offset the platform holds; send from here next.")
    cancel = serializers.BooleanField(
        help_text="Stop the run: a user cancelled it, or another host of it failed."
    )
    pinned = serializers.ListField(
        child=serializers.IntegerField(), help_text="Checkpoint steps the host must keep."
    )
    handoff = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="A run of a kind with the handoff capability, on several hosts: the files "
        "its hosts handed over in this attempt and the platform stored (id, name, bytes, "
        "sha256); another host fetches each from runs/{id}/handoff/{file}/.",
    )


class FinishSerializer(AttemptSerializer):
    exit_code = serializers.IntegerField(
        allow_null=True, min_value=EXIT_CODES[0], max_value=EXIT_CODES[1]
    )
    exited_at = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_TIMESTAMP,
        help_text="Unix seconds.",
    )
    error = serializers.CharField(required=False, allow_blank=True, max_length=10000)
    stop_reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


# -- snapshots ------------------------------------------------------------


class SnapshotUploadSerializer(serializers.Serializer):
    snapshot = JSONObjectField(help_text="The output of `python -m workers.collect`.")
    run = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ID,
        help_text="The run about to execute in it.",
    )


class SnapshotRecordedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    hash = serializers.CharField()
    new_version = serializers.BooleanField(help_text="The host's environment changed.")
    change = serializers.CharField(help_text="What changed from the previous version.")
