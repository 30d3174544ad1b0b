from __future__ import annotations

from typing import Any

from rest_framework import serializers

from npulab.runs.models import Checkpoint, Run, RunAttempt, RunEvent
from npulab.runs.selectors import steps


class RunSerializer(serializers.ModelSerializer):
    """A run as users and CI see it."""

    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail")
    web_url = serializers.SerializerMethodField()
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    submitted_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    spec = serializers.SerializerMethodField()
    duration_s = serializers.SerializerMethodField()
    infrastructure_failure = serializers.BooleanField(read_only=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "url",
            "web_url",
            "kind",
            "name",
            "tags",
            "status",
            "priority",
            "device_type",
            "devices",
            "requested_host",
            "labels",
            "host",
            "device_indices",
            "snapshot",
            "attempt",
            "restarts",
            "submitted_by",
            "created",
            "dispatched_at",
            "started_at",
            "exited_at",
            "finished_at",
            "duration_s",
            "queue_reason",
            "cancel_requested",
            "exit_cause",
            "exit_reason",
            "exit_code",
            "infrastructure_failure",
            "result",
            "spec",
        ]
        read_only_fields = fields

    def get_web_url(self, run: Run) -> str:
        request = self.context.get("request")
        path = run.get_absolute_url()
        return request.build_absolute_uri(path) if request else path

    def get_spec(self, run: Run) -> dict[str, Any]:
        return run.display_spec

    def get_duration_s(self, run: Run) -> float | None:
        duration = run.duration
        return round(duration.total_seconds(), 3) if duration is not None else None


class RunDetailSerializer(RunSerializer):
    """A run with its step results, attempts and checkpoints."""

    steps = serializers.SerializerMethodField()
    attempts = serializers.SerializerMethodField()
    checkpoints = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "steps", "attempts", "checkpoints"]
        read_only_fields = fields

    def get_attempts(self, run: Run) -> list[dict[str, Any]]:
        return RunAttemptSerializer(run.attempts.select_related("host"), many=True).data

    def get_checkpoints(self, run: Run) -> list[dict[str, Any]]:
        return CheckpointSerializer(run.checkpoints.all(), many=True).data

    def get_steps(self, run: Run) -> list[dict[str, Any]]:
        return [dict(event.data, attempt=event.attempt, time=event.time) for event in steps(run)]


class RunEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunEvent
        fields = ["id", "attempt", "type", "time", "data"]
        read_only_fields = fields


# -- the agent API --------------------------------------------------------


class AttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(min_value=1)


class ResumeSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField()


class ClaimReplySerializer(serializers.Serializer):
    run = serializers.IntegerField()
    attempt = serializers.IntegerField()
    spec = serializers.JSONField(help_text="The run's spec, unredacted: the host needs its env.")
    devices = serializers.ListField(child=serializers.IntegerField())
    resume = ResumeSerializer(
        allow_null=True, help_text="The stored checkpoint a new attempt resumes from, if any."
    )


class PassThroughField(serializers.JSONField):
    """Parsed JSON taken as it is.

    DRF's JSONField re-encodes its value to prove it is JSON; a value that
    came out of the request's JSON parser is, and re-encoding 10,000 events
    costs as much as storing them.
    """

    def to_internal_value(self, data: Any) -> Any:
        return data


class EventBatchSerializer(AttemptSerializer):
    start = serializers.IntegerField(min_value=0, help_text="Byte offset of the first event.")
    end = serializers.IntegerField(min_value=0, help_text="Byte offset just past the last event.")
    # Checked as a whole, not item by item: a batch holds thousands of events.
    events = PassThroughField(help_text="The events, as in events.jsonl.")

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
    cancel = serializers.BooleanField(help_text="Stop the run: a user cancelled it.")
    pinned = serializers.ListField(
        child=serializers.IntegerField(), help_text="Checkpoint steps the host must keep."
    )


class FinishSerializer(AttemptSerializer):
    exit_code = serializers.IntegerField(allow_null=True)
    exited_at = serializers.FloatField(required=False, allow_null=True)
    error = serializers.CharField(required=False, allow_blank=True, max_length=10000)
    stop_reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


class CheckpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = [
            "step",
            "attempt",
            "bytes",
            "sha256",
            "status",
            "status_reason",
            "pinned",
            "host_path",
            "created",
        ]
        read_only_fields = fields


class RunAttemptSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    infrastructure_failure = serializers.SerializerMethodField()

    class Meta:
        model = RunAttempt
        fields = [
            "number",
            "host",
            "device_indices",
            "status",
            "started_at",
            "finished_at",
            "exit_cause",
            "exit_reason",
            "exit_code",
            "resumed_from_step",
            "infrastructure_failure",
        ]
        read_only_fields = fields

    def get_infrastructure_failure(self, attempt: RunAttempt) -> bool:
        return attempt.exit_cause in Run.INFRASTRUCTURE_CAUSES
