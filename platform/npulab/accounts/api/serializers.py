from __future__ import annotations

from rest_framework import serializers

from npulab.accounts.forms import MAX_EXPIRY_DAYS
from npulab.accounts.models import DEFAULT_SCOPES, ApiToken, Scope
from npulab.core.fields import TextField


class ApiTokenSerializer(serializers.ModelSerializer):
    """A token as its list shows it: never the token itself, which only its creation answers."""

    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.choices))
    status = serializers.ChoiceField(choices=ApiToken.Status.choices, read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "display",
            "scopes",
            "created",
            "last_used",
            "expires",
            "revoked",
            "status",
        ]
        read_only_fields = fields


class ApiTokenCreateSerializer(serializers.Serializer):
    name = TextField(max_length=100, required=False, allow_blank=True, default="")
    scopes = serializers.MultipleChoiceField(
        choices=Scope.choices, default=DEFAULT_SCOPES, allow_empty=False
    )
    expires_days = serializers.IntegerField(
        min_value=1,
        max_value=MAX_EXPIRY_DAYS,
        required=False,
        allow_null=True,
        default=None,
        help_text="The token stops working after this many days; null: never.",
    )


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The token: shown this once only.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields
