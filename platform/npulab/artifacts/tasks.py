"""Control-plane tasks of the artifact store."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from npulab.artifacts.services import do_expire_uploads
from workers.contract.tasks import EXPIRE_UPLOADS


@shared_task(name=EXPIRE_UPLOADS, ignore_result=True)
def expire_uploads_task() -> int:
    return do_expire_uploads(settings.NPULAB["ARTIFACT_UPLOAD_EXPIRY_S"])
