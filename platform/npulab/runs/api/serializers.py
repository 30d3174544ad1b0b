from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from npulab.runs.models import Placement, Run, RunAttempt, RunEvent
from npulab.runs.selectors import logged_parameters, progress, steps
from workers.contract import kinds

# Every cause the contract and the kinds declare; a kind's new cause adds to the enum.
EXIT_CAUSES = [(name, cause.label) for name, cause in kinds.causes().items()]


class ProgressSerializer(serializers.Serializer):
    """How far a run has got: steps from its metrics, the reported step running now."""

    step = serializers.IntegerField(
        allow_null=True, help_text="Steps done, by the furthest metric logged."
    )
    total_steps = serializers.IntegerField(
        allow_null=True, help_text="The steps its spec asks for; null: it does not say."
    )
    steps_per_s = serializers.FloatField(
        allow_null=True, help_text="Over the current attempt's last points; null once ended."
    )
    eta_s = serializers.FloatField(
        allow_null=True, help_text="Seconds to total_steps at that speed."
    )
    running_step = serializers.IntegerField(
        allow_null=True, help_text="Which reported step (1, 2 ...) is running now."
    )
    running_step_name = serializers.CharField(
        allow_null=True,
        help_text="That step's name, when the runner said it began (null: it did not say).",
    )
    running_s = serializers.FloatField(
        allow_null=True, help_text="How long that step has been running."
    )
    finished_steps = serializers.ListField(
        child=serializers.CharField(), help_text="The steps this attempt finished, in order."
    )


class RunSerializer(serializers.ModelSerializer):
    """A run as users and CI see it."""

    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail")
    web_url = serializers.SerializerMethodField()
    # Null until the run is placed, and again if its host is deleted.
    host = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    submitted_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="The submitter's username; null once the account is deleted.",
    )
    project = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="The slug of the run's project."
    )
    spec = serializers.SerializerMethodField()
    duration_s = serializers.SerializerMethodField()
    infrastructure_failure = serializers.BooleanField(read_only=True)
    exit_cause = serializers.ChoiceField(choices=EXIT_CAUSES, read_only=True)
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    labels = serializers.ListField(child=serializers.CharField(), read_only=True)
    device_indices = serializers.ListField(child=serializers.IntegerField(), read_only=True)
    result = serializers.DictField(
        read_only=True,
        help_text="The runner's result event: status, reason, cause and its summary object.",
    )
    progress = serializers.SerializerMethodField()
    shape = serializers.CharField(
        read_only=True,
        help_text='Hosts × devices each, as the run list shows it: "2 × 8 npu"; placements '
        'apart each their own: "1 cpu + 1 npu".',
    )
    diagnosis = serializers.SerializerMethodField(
        help_text="Why the run failed, in Ascend's codes (docs/diagnosis.md): category, codes, "
        "line, fix, blame, rule, evidence [{file, line_no, text}], findings; null for a run "
        "that succeeded or that nothing explains."
    )
    findings = serializers.JSONField(
        read_only=True, help_text="Training-health findings (NaN loss, loss spike ...)."
    )

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
            "hosts",
            "shape",
            "requested_host",
            "labels",
            "wait_for_host",
            "host",
            "device_indices",
            "snapshot",
            "attempt",
            "restarts",
            "submitted_by",
            "project",
            "created",
            "dispatched_at",
            "started_at",
            "exited_at",
            "finished_at",
            "duration_s",
            "queue_reason",
            "queue_expires_at",
            "cancel_requested",
            "exit_cause",
            "exit_reason",
            "exit_code",
            "infrastructure_failure",
            "diagnosis",
            "findings",
            "result",
            "progress",
            "spec",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "object", "nullable": True})
    def get_diagnosis(self, run: Run) -> dict[str, Any] | None:
        return _diagnosis(run)

    @extend_schema_field(ProgressSerializer(allow_null=True))
    def get_progress(self, run: Run) -> dict[str, Any] | None:
        """In a list, only an active run's: it costs queries per run (the detail has it always)."""
        return _progress(run) if run.is_active else None

    def get_web_url(self, run: Run) -> str:
        request = self.context.get("request")
        path = run.get_absolute_url()
        return request.build_absolute_uri(path) if request else path

    def get_spec(self, run: Run) -> dict[str, Any]:
        return run.display_spec

    def get_duration_s(self, run: Run) -> float | None:
        duration = run.duration
        return round(duration.total_seconds(), 3) if duration is not None else None


class RunEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunEvent
        fields = ["id", "attempt", "type", "time", "data"]
        read_only_fields = fields


class RunAttemptSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    device_indices = serializers.ListField(child=serializers.IntegerField(), read_only=True)
    exit_cause = serializers.ChoiceField(choices=EXIT_CAUSES, read_only=True)
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
        return attempt.infrastructure_failure


def _diagnosis(run: Run) -> dict[str, Any] | None:
    return run.diagnosis if run.status != Run.Status.SUCCEEDED else None


class PlacementSerializer(serializers.ModelSerializer):
    """One host's share of the current attempt."""

    host = serializers.CharField(source="host_name", read_only=True)
    ranks = serializers.ListField(
        source="rank_range",
        child=serializers.IntegerField(),
        read_only=True,
        help_text="[first, last] global rank of the host's processes.",
    )
    devices = serializers.ListField(
        source="device_indices", child=serializers.IntegerField(), read_only=True
    )
    role = serializers.CharField(
        read_only=True,
        help_text='What the host is for, in a run whose placements are apart ("side b" of a '
        'parity run on two hosts); "" in a gang.',
    )
    snapshot = serializers.PrimaryKeyRelatedField(
        read_only=True,
        allow_null=True,
        help_text="The snapshot of the host's environment the share ran in (its stack).",
    )

    class Meta:
        model = Placement
        fields = [
            "host",
            "node_rank",
            "role",
            "ranks",
            "devices",
            "snapshot",
            "state",
            "exit_code",
            "exit_cause",
            "exit_reason",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


# Fields a capability's app adds to a run's detail (``checkpoints``), from its ``ready``:
# name -> a factory of the read-only field, which reads the run.
_detail_fields: dict[str, Callable[[], serializers.Field]] = {}


def add_detail_field(name: str, field: Callable[[], serializers.Field]) -> None:
    """Show ``field()`` as ``name`` in every run's detail (the schema too)."""
    _detail_fields[name] = field


class RunDetailSerializer(RunSerializer):
    """A run with its step results, attempts, placements, and what its capabilities add
    (checkpoints)."""

    placements = serializers.SerializerMethodField()
    steps = serializers.SerializerMethodField()
    attempts = serializers.SerializerMethodField()
    params = serializers.SerializerMethodField(
        help_text="The parameters the script logged (MLflow's log_param), by name."
    )
    logged_tags = serializers.SerializerMethodField(
        help_text="The tags the script set (MLflow's set_tag), by name."
    )

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "steps",
            "attempts",
            "placements",
            "params",
            "logged_tags",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_params(self, run: Run) -> dict[str, str]:
        return logged_parameters(run)[0]

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
    def get_logged_tags(self, run: Run) -> dict[str, str]:
        return logged_parameters(run)[1]

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name, field in _detail_fields.items():
            fields[name] = field()
        return fields

    @extend_schema_field(PlacementSerializer(many=True))
    def get_placements(self, run: Run) -> list[dict[str, Any]]:
        """The current attempt's hosts, node rank 0 first (empty while queued)."""
        return PlacementSerializer(run.placements.filter(attempt=run.attempt), many=True).data

    @extend_schema_field(ProgressSerializer(allow_null=True))
    def get_progress(self, run: Run) -> dict[str, Any] | None:
        return _progress(run)

    @extend_schema_field(RunAttemptSerializer(many=True))
    def get_attempts(self, run: Run) -> list[dict[str, Any]]:
        return RunAttemptSerializer(run.attempts.select_related("host"), many=True).data

    def get_steps(self, run: Run) -> list[dict[str, Any]]:
        return [dict(event.data, attempt=event.attempt, time=event.time) for event in steps(run)]


def _progress(run: Run) -> dict[str, Any] | None:
    found = progress(run)
    return ProgressSerializer(found).data if found is not None else None
