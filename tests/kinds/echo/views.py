"""The echo kind's page and API route: the words of one run."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from npulab.runs.access import run_for


@login_required
def words_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(request.user, pk)
    return render(request, "echo/words.html", {"run": run, "echo_words": run.echo_words.all()})


class WordListView(APIView):
    # A test-only route: the committed schema describes the product's API alone.
    @extend_schema(exclude=True)
    def get(self, request: Request, run_id: int) -> Response:
        """The words the run echoed, in order."""
        run = run_for(request.user, run_id)
        return Response([{"index": w.index, "word": w.word} for w in run.echo_words.all()])
