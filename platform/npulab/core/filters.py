"""The API's query filters: a boolean filter refuses what is not a boolean."""

from __future__ import annotations

import copy
from typing import Any

from django import forms
from django.db import models
from django_filters import rest_framework as filters
from django_filters.widgets import BooleanWidget


class _BooleanWidget(BooleanWidget):
    """django-filter's, but a value it does not know is kept for the field to refuse."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        value = super().value_from_datadict(data, files, name)
        raw = data.get(name)
        return raw if value is None and raw not in (None, "") else value


class _BooleanField(forms.NullBooleanField):
    """Only true, false or nothing; Django's would read ``x`` as none."""

    def to_python(self, value: Any) -> bool | None:
        if value not in (True, False, None, ""):
            raise forms.ValidationError("must be true or false", code="invalid")
        return super().to_python(value)


class BooleanFilter(filters.BooleanFilter):
    field_class = _BooleanField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", _BooleanWidget)
        super().__init__(*args, **kwargs)


class FilterSet(filters.FilterSet):
    """The base of the filter sets views declare as ``filterset_fields``; ``isnull`` too."""

    FILTER_DEFAULTS = copy.deepcopy(filters.FilterSet.FILTER_DEFAULTS)
    FILTER_DEFAULTS[models.BooleanField] = {"filter_class": BooleanFilter}


class FilterBackend(filters.DjangoFilterBackend):
    """``DEFAULT_FILTER_BACKENDS``: django-filter's, with the strict boolean filter."""

    filterset_base = FilterSet
