from __future__ import annotations

from typing import Any

from rest_framework import serializers

from npulab.coverage.compare import GROUPS
from npulab.coverage.models import OpResult
from npulab.runs.api.serializers import RunSerializer
from workers.kinds.coverage import PASSES, STATUSES


class OpResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = OpResult
        fields = [
            "op",
            "variant",
            "dtype",
            "status",
            "error",
            "max_abs_err",
            "max_rel_err",
            "seconds",
            "samples",
            "family",
            "detail",
        ]
        # Read-only: a writable integer's bounds in the schema would depend on the database.
        read_only_fields = fields

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # ``pass`` is a Python keyword: the model calls it phase.
        fields["pass"] = serializers.ChoiceField(
            source="phase", choices=PASSES, read_only=True, help_text="forward, or backward."
        )
        return fields


class DtypeRateSerializer(serializers.Serializer):
    dtype = serializers.CharField()
    passed = serializers.IntegerField()
    tested = serializers.IntegerField()
    rate = serializers.FloatField(allow_null=True)


class CoverageSummarySerializer(serializers.Serializer):
    run = serializers.IntegerField()
    op_set = serializers.CharField(allow_blank=True)
    done = serializers.IntegerField(help_text="Results stored so far.")
    total = serializers.IntegerField(
        allow_null=True, help_text="Results the run announced; null before its plan arrived."
    )
    percent = serializers.FloatField(allow_null=True)
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Results per status: " + ", ".join(STATUSES)
    )
    elapsed_s = serializers.FloatField(allow_null=True)
    eta_s = serializers.FloatField(allow_null=True, help_text="While the run is active.")
    rates = DtypeRateSerializer(many=True, help_text="Forward pass rate per dtype.")
    captured_ops = serializers.ListField(
        child=serializers.DictField(),
        help_text="For op set model: the ops the entry called (op, overload, dtypes, shapes).",
    )


class CellSideSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=STATUSES)
    error = serializers.CharField(allow_blank=True)
    max_abs_err = serializers.FloatField(allow_null=True)
    max_rel_err = serializers.FloatField(allow_null=True)


class CellChangeSerializer(serializers.Serializer):
    op = serializers.CharField()
    variant = serializers.CharField(allow_blank=True)
    dtype = serializers.CharField()
    baseline = CellSideSerializer(allow_null=True)
    candidate = CellSideSerializer(allow_null=True)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["pass"] = serializers.ChoiceField(source="phase", choices=PASSES)
        return fields


class CellGroupsSerializer(serializers.Serializer):
    """The compared cells, one list per group."""

    def get_fields(self) -> dict[str, Any]:
        return {group: CellChangeSerializer(many=True) for group in GROUPS}


class CoverageCompareSerializer(serializers.Serializer):
    baseline = RunSerializer()
    candidate = RunSerializer()
    regressions = serializers.IntegerField(
        help_text="Cells that passed in the baseline and do not now: what a pipeline gates on."
    )
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Cells per group: " + ", ".join(GROUPS)
    )
    groups = CellGroupsSerializer()
