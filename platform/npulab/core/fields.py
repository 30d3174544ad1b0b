"""Serializer fields the API shares."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class TextField(serializers.CharField):
    """Text that must come as a JSON string, as the schema says.

    DRF's ``CharField`` takes a number as its decimal text (``0`` as ``"0"``),
    so a body the schema refuses would be accepted.
    """

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
