from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from npulab.checkpoints.models import Checkpoint
from npulab.checkpoints.services import do_pin_checkpoint
from npulab.runs.access import change_refused, run_for


@login_required
@require_POST
def checkpoint_pin(request: HttpRequest, pk: int, step: int) -> HttpResponse:
    run = run_for(request.user, pk)
    checkpoint = get_object_or_404(Checkpoint, run=run, step=step)
    refused = change_refused(request.user, run, "pin its checkpoints")
    if refused:
        messages.error(request, refused)
    else:
        do_pin_checkpoint(checkpoint, request.POST.get("pinned") == "1")
    return redirect(run)
