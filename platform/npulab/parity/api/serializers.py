"""The parity API's shapes."""

from __future__ import annotations

from rest_framework import serializers

from npulab.parity.models import ParityLayer
from workers.kinds.parity import LAYER_FIELDS


class ParityLayerSerializer(serializers.ModelSerializer):
    # Declared, not derived from the model: a derived bound is the database's (64 bits on
    # SQLite, 32 on PostgreSQL), and the schema must not depend on it.
    index = serializers.IntegerField(min_value=0, help_text="Its place in execution order.")
    broken = serializers.ListField(
        child=serializers.CharField(),
        help_text="The thresholds it breaks: cosine, max_rel_err, thousandth_ratio, nan, "
        "shape, missing (a layer of side B that side A does not have).",
    )
    stack = serializers.ListField(
        child=serializers.CharField(), help_text="The script's frames of its call site."
    )

    class Meta:
        model = ParityLayer
        fields = list(LAYER_FIELDS)


class FirstDivergentSerializer(serializers.Serializer):
    name = serializers.CharField()
    cosine = serializers.FloatField(allow_null=True)
    max_abs_err = serializers.FloatField(allow_null=True)
    max_rel_err = serializers.FloatField(allow_null=True)
    stack = serializers.ListField(child=serializers.CharField())
    index = serializers.IntegerField()
    broken = serializers.ListField(child=serializers.CharField())


class StackSerializer(serializers.Serializer):
    chip = serializers.CharField(allow_null=True)
    driver = serializers.CharField(allow_null=True)
    firmware = serializers.CharField(allow_null=True)
    cann = serializers.CharField(allow_null=True)
    python = serializers.CharField(allow_null=True)
    torch = serializers.CharField(allow_null=True)
    torch_npu = serializers.CharField(allow_null=True)
    mindspore = serializers.CharField(allow_null=True)


class SideSerializer(serializers.Serializer):
    host = serializers.CharField(allow_null=True, help_text="The host the side ran on.")
    snapshot = serializers.IntegerField(
        allow_null=True, help_text="The snapshot of its environment there."
    )
    stack = StackSerializer(allow_null=True, help_text="That snapshot's stack.")
    stack_text = serializers.CharField(help_text='The stack as people write it: "CANN 8.0".')


class SidesSerializer(serializers.Serializer):
    a = SideSerializer()
    b = SideSerializer()


class ParitySerializer(serializers.Serializer):
    run = serializers.IntegerField()
    status = serializers.CharField()
    sides = SidesSerializer(
        help_text="Where each side ran and on which stack: both on the run's host, or each on "
        "a host of its own."
    )
    summary = serializers.DictField(
        help_text="The run's result summary: mode, thresholds, loss parity, counts."
    )
    first_divergent = FirstDivergentSerializer(
        allow_null=True, help_text="The first layer in execution order that breaks a threshold."
    )
    count = serializers.IntegerField(help_text="Layers in all.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    layers = ParityLayerSerializer(many=True, help_text="A page of the layers, in order.")
