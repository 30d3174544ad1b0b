"""The metric time-series store: series owned by a run or by a host's device, their points and
rollup blocks. A run's series are stored in chunks of points, a host's telemetry a row a point.

A store, not a domain: other apps' models are named by string only, so this app imports none of
them (the owner is passed in as an ``npulab.series.owners.Owner``).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workers.contract.capture import TRACK


class MetricSeries(models.Model):
    """One metric of one owner: its points' owner, with the counts a page lists.

    The owner is a run, or a host (a device of it when ``device_index`` is set, the host as a
    whole otherwise): exactly one of the two, which the database checks.
    """

    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="metric_series"
    )
    host = models.ForeignKey(
        "hosts.Host",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="metric_series",
    )
    device_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="The host's device; empty for the host as a whole."
    )
    key = models.CharField(max_length=200)
    source = models.CharField(
        max_length=16,
        default=TRACK,
        help_text="Where a run's points came from: track, mlflow, tensorboard or stdout.",
    )
    points = models.BigIntegerField(default=0)
    last_step = models.BigIntegerField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "metric series"
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(run__isnull=False, host__isnull=True, device_index__isnull=True)
                    | Q(run__isnull=True, host__isnull=False)
                ),
                name="series_one_owner",
            ),
            # One key from two sources is two series, told apart by their source.
            models.UniqueConstraint(
                fields=["run", "source", "key"],
                condition=Q(run__isnull=False),
                name="series_run_source_key",
            ),
            # Two constraints, not one: NULLs are distinct in a unique index, so a single
            # (host, device_index, key) would let a host-wide key be created twice.
            models.UniqueConstraint(
                fields=["host", "device_index", "key"],
                condition=Q(host__isnull=False, device_index__isnull=False),
                name="series_host_device_key",
            ),
            models.UniqueConstraint(
                fields=["host", "key"],
                condition=Q(host__isnull=False, device_index__isnull=True),
                name="series_host_key",
            ),
        ]

    def __str__(self) -> str:
        if self.run_id is not None:
            return f"{self.key} ({self.source}) of run {self.run_id}"
        if self.device_index is not None:
            return f"{self.key} of host {self.host_id} device {self.device_index}"
        return f"{self.key} of host {self.host_id}"


class MetricChunk(models.Model):
    """Points of a step series (a run's metric), up to ``chunks.MAX_POINTS`` in one row.

    ``data`` is the points' steps, values and times as arrays (npulab.series.chunks), sorted
    by step; ``first_step`` and ``last_step`` bound them for a read of a range. A batch of a
    series is one chunk (or several, when larger), so storing one costs a row, not a row a
    point. No foreign-key constraint, as for the rollups: the series owns its chunks.
    """

    series = models.ForeignKey(
        MetricSeries,
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
        db_index=False,  # the index below leads with it
    )
    attempt = models.PositiveIntegerField(
        help_text="The run attempt that logged the points; 0 for a host's series."
    )
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    points = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        # last_step a key too: a read from a step skips the chunks that end before it in
        # the index, without fetching them.
        indexes = [
            models.Index(
                fields=["series", "first_step", "last_step"], name="metricchunk_series_steps"
            )
        ]

    def __str__(self) -> str:
        return f"{self.series_id}[{self.first_step}..{self.last_step}]"


class Metric(models.Model):
    """One point of a timed series (a host's telemetry): its step is a Unix second.

    Telemetry is a row per point because npulab.telemetry reads and rolls it up by time
    range in SQL, a few points per series per batch; a run's step series are stored in
    chunks (MetricChunk). Written in bulk (COPY on PostgreSQL). No foreign-key constraint
    and a float ``time``: at thousands of points a second, a constraint check and a
    timestamp conversion per row are most of the cost. The series owns its points; deleting
    one deletes them (Django's collector, one statement).
    """

    series = models.ForeignKey(
        MetricSeries,
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    step = models.BigIntegerField()
    value = models.FloatField(null=True, help_text="Null for a NaN or infinite value.")
    time = models.FloatField(help_text="Unix seconds, as the host worker sampled it.")

    class Meta:
        # INCLUDE makes a window's read an index-only scan on PostgreSQL;
        # other databases build the index without it (check models.W040).
        indexes = [
            models.Index(fields=["series", "step"], include=["value"], name="metric_series_step")
        ]

    def __str__(self) -> str:
        return f"{self.series_id}[{self.step}]={self.value}"


class MetricRollupSegment(models.Model):
    """Rollup blocks of one series and size: up to ``rollups.SEGMENT`` consecutive blocks of
    ``size`` steps, as arrays in one row.

    A block aggregates the points of ``size`` steps (count, finite count, sum, min, max and
    first step; npulab.series.rollups keeps them equal to the points). A chart of a million
    points combines a thousand blocks, read as one or a few of these rows with a
    ``numpy.frombuffer`` each: a row a block cost a read ten times as much at ten times the
    resolution, and a batch's write a row for every ten points. ``segment`` numbers the
    row's span of steps: its blocks start from ``segment * size * rollups.SEGMENT`` on.
    No foreign-key constraint, as for the chunks: the series owns its rows.
    """

    series = models.ForeignKey(
        MetricSeries,
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
        db_index=False,  # the unique constraint leads with it
    )
    size = models.IntegerField()
    segment = models.BigIntegerField()
    blocks = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["series", "size", "segment"], name="metricrollupsegment_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.series_id}[{self.size}:{self.segment}]"
