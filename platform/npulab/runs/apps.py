from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "npulab.runs"
    label = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from npulab.hosts.pages import host_page
        from npulab.projects.pages import project_page
        from npulab.runs import dispatch, pages, scheduler, telemetry
        from npulab.runs.selectors import (
            host_runs_context,
            project_runs_context,
            snapshot_runs_context,
        )
        from npulab.snapshots.pages import snapshot_page

        # A submission alone in the queue is placed at once by the submitting process.
        dispatch.set_placement_pass(scheduler.place_queued_runs)
        host_page.add(host_runs_context)
        project_page.add(project_runs_context)
        snapshot_page.add(snapshot_runs_context)
        # The telemetry of the devices a run used, on every run's page.
        pages.add_panel(telemetry.PANEL)
