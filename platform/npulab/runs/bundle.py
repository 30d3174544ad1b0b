"""A run's support bundle: one archive to attach to a vendor ticket (docs/diagnosis.md).

It holds the spec (secret-looking env redacted), the snapshot the run ran under, the
diagnosis and findings, the log (redacted when it was stored), what the host collected on
failure (plogs, kernel messages, npu-smi health: the ``diagnosis.tar.gz`` artifact of each
attempt), the host's health, and the telemetry of the run's devices around the failure.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import time
from typing import IO, Any

from django.core.serializers.json import DjangoJSONEncoder
from django.forms.models import model_to_dict
from django.http import FileResponse

from npulab.artifacts.models import Artifact
from npulab.artifacts.services import open_artifact
from npulab.health.selectors import health_of
from npulab.runs.models import Run
from npulab.runs.selectors import log_text
from npulab.telemetry.reads import window
from workers.contract.redact import redact_text

COLLECTED_NAME = "diagnosis.tar.gz"
# Telemetry this long before and after the failed attempt.
TELEMETRY_AROUND_S = 600
# The log in the bundle: its last lines, the failure being at its end.
MAX_LOG_BYTES = 64 * 1024 * 1024


def _json(data: Any) -> bytes:
    return json.dumps(data, indent=2, cls=DjangoJSONEncoder, ensure_ascii=False).encode()


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    archive.addfile(info, io.BytesIO(data))


def _add_file(archive: tarfile.TarFile, name: str, handle: IO[bytes], size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = int(time.time())
    archive.addfile(info, handle)


def build_bundle(run: Run) -> IO[bytes]:
    """The bundle as a gzipped tar in a temporary file, positioned at its start."""
    prefix = f"npulab-run-{run.pk}/"
    # Handed to the response, which closes it once sent.
    output = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115
    with tarfile.open(fileobj=output, mode="w:gz") as archive:
        _add(archive, prefix + "spec.json", _json(run.display_spec))
        summary = {
            "id": run.pk,
            "kind": run.kind,
            "status": run.status,
            "exit_cause": run.exit_cause,
            "exit_reason": redact_text(run.exit_reason),
            "host": run.host.name if run.host else None,
            "device_indices": run.device_indices,
            "attempt": run.attempt,
            "created": run.created,
            "finished_at": run.finished_at,
        }
        _add(archive, prefix + "run.json", _json(summary))
        _add(
            archive,
            prefix + "diagnosis.json",
            _json({"diagnosis": run.diagnosis, "findings": run.findings}),
        )
        if run.snapshot is not None:
            snapshot = run.snapshot
            _add(
                archive,
                prefix + "snapshot.json",
                _json({"summary": snapshot.summary, "data": snapshot.data}),
            )
        _add_log(archive, prefix + "logs/run.log", run)
        for artifact in Artifact.objects.filter(
            run=run, name=COLLECTED_NAME, status=Artifact.Status.STORED
        ).order_by("attempt"):
            with open_artifact(artifact) as handle:
                _add_file(
                    archive,
                    prefix + f"collected/attempt-{artifact.attempt}.tar.gz",
                    handle,
                    artifact.bytes,
                )
        if run.host is not None:
            health = health_of(run.host)
            _add(
                archive,
                prefix + "host-health.json",
                _json(model_to_dict(health) if health is not None else None),
            )
            _add(archive, prefix + "telemetry.json", _json(_telemetry(run)))
    output.seek(0)
    return output


def bundle_response(run: Run) -> FileResponse:
    """The bundle as a download: the page's button and the API serve the same."""
    return FileResponse(
        build_bundle(run),
        as_attachment=True,
        filename=f"npulab-run-{run.pk}-bundle.tar.gz",
        content_type="application/gzip",
    )


def _add_log(archive: tarfile.TarFile, name: str, run: Run) -> None:
    with tempfile.TemporaryFile() as log:
        for line in log_text(run):
            log.write(line.encode("utf-8", errors="replace"))
        size = log.tell()
        # A huge log keeps its end, where a failure is.
        start = max(0, size - MAX_LOG_BYTES)
        log.seek(start)
        _add_file(archive, name, log, size - start)


def _telemetry(run: Run) -> dict[str, Any]:
    """The run's devices around the end of its last attempt (or now, while it runs)."""
    end = (
        (run.finished_at or run.exited_at).timestamp()
        if (run.finished_at or run.exited_at)
        else time.time()
    )
    start = run.started_at.timestamp() if run.started_at else end - TELEMETRY_AROUND_S
    start = max(start, end - 6 * 3600)
    return window(
        run.host_id,
        start - TELEMETRY_AROUND_S,
        end + TELEMETRY_AROUND_S,
        devices=list(run.device_indices or []),
    )
