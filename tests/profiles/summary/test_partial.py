"""The summary's partial, as the run page's Profiles card includes it (``profile.summary``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

from django.template.loader import render_to_string

from npulab.profiles.summary import summarise
from tests.profiles.summary.conftest import ASCEND_PT


def _render(summary: dict, timeline_url: str = "/profiles/7/timeline/") -> str:
    profile = SimpleNamespace(pk=7, summary=summary, timeline_url=timeline_url)
    return render_to_string("profiles/partials/summary.html", {"profile": profile})


def test_findings_link_to_their_place_in_the_timeline(cuda_traces: Path) -> None:
    summary = summarise(str(cuda_traces))
    html = _render(summary)
    for finding in summary["findings"]:
        assert finding["title"].replace("`", "&#x60;") in html or finding["title"] in html
        link = f"/profiles/7/timeline/?at={finding['ts_us']:.3f}&amp;span={finding['dur_us']:.3f}"
        assert link in html, link
    assert 'data-type="COMPUTATION overlapping COMMUNICATION"' in html
    assert html.count('<tr data-rank="') == 2
    assert "aten::randperm" in html


def test_no_links_without_a_timeline_and_the_npu_views(tmp_path: Path) -> None:
    html = _render(summarise(str(ASCEND_PT)), timeline_url="")
    assert "show in timeline" not in html
    assert 'data-core="AI CPU"' in html
    assert "communication.json" in html


def test_a_folder_of_ranks_shows_each_ranks_npu_views(tmp_path: Path) -> None:
    for rank in (0, 1):
        shutil.copytree(ASCEND_PT, tmp_path / f"rank{rank}_ascend_pt")
    html = _render(summarise(str(tmp_path)))
    assert html.count('class="mb-2 profile-npu-rank"') == 2
    assert "rank1_ascend_pt</summary>" in html
    assert html.count('data-core="AI CPU"') == 2


def test_a_profile_without_summary_says_so() -> None:
    assert "No summary yet." in _render({})
