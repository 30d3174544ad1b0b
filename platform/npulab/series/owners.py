"""Who a series belongs to, named by keys so that this store imports no domain app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from npulab.core.sql import column_name
from npulab.series.models import MetricSeries


@dataclass(frozen=True)
class Owner:
    """A run, or a host: one of its devices when ``device_index`` is set, else the host itself.

    Build one with ``Owner.of_run`` or ``Owner.of_host``; every function of the store takes
    one, so a run's metrics and a device's telemetry go through the same code.
    """

    run_id: int | None = None
    host_id: int | None = None
    device_index: int | None = None
    # A run's series by where they came from (workers.contract.capture.SOURCES). Writes name
    # one; a read without one finds the series of every source (``reads.find`` prefers
    # ``track``, then the others in SOURCES' order).
    source: str | None = None

    def __post_init__(self) -> None:
        if (self.run_id is None) == (self.host_id is None):
            raise ValueError("a series is owned by a run or by a host, exactly one")
        if self.run_id is not None and self.device_index is not None:
            raise ValueError("a device index belongs to a host, not to a run")
        if self.host_id is not None and self.source is not None:
            raise ValueError("a host's telemetry has no source")

    @classmethod
    def of_run(cls, run_id: int, source: str | None = None) -> Owner:
        return cls(run_id=run_id, source=source)

    @classmethod
    def of_host(cls, host_id: int, device_index: int | None = None) -> Owner:
        return cls(host_id=host_id, device_index=device_index)

    def fields(self) -> dict[str, Any]:
        """The MetricSeries fields that name this owner, to filter on or to create with.

        A host's ``device_index`` is always included: ``filter(device_index=None)`` is IS
        NULL, so the host's own series never match one of its devices'.
        """
        if self.run_id is not None:
            if self.source is None:
                return {"run_id": self.run_id}
            return {"run_id": self.run_id, "source": self.source}
        return {"host_id": self.host_id, "device_index": self.device_index}

    def condition(self, alias: str = "") -> tuple[str, list[Any]]:
        """``fields`` as a plain SQL condition on the series table (its columns prefixed
        ``alias.`` when given) and its parameters: the store's hot statements skip the ORM."""
        prefix = f"{alias}." if alias else ""
        fields = self.fields()
        tests = [
            f"{prefix}{column_name(MetricSeries, name)} {'IS NULL' if value is None else '= %s'}"
            for name, value in fields.items()
        ]
        return " AND ".join(tests), [value for value in fields.values() if value is not None]
