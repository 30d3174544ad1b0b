from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    """Profiling timelines: traces of runs, their summaries, the timeline view and diffs."""

    name = "npulab.profiles"
    label = "profiles"
    verbose_name = "Profiles"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from npulab.artifacts.services import register_size_limit
        from npulab.artifacts.signals import artifact_stored
        from npulab.profiles import services
        from npulab.profiles.models import Profile
        from npulab.profiles.run_panel import TEMPLATE, panel_context
        from npulab.runs.kinds import Panel
        from npulab.runs.pages import add_panel
        from workers.contract.events import TRACE

        artifact_stored.connect(services.on_artifact_stored, dispatch_uid="profiles")
        post_delete.connect(services.on_profile_deleted, sender=Profile)
        # A trace over the limit is refused when it is declared: nothing of it is stored.
        register_size_limit(TRACE, "PROFILE_MAX_BYTES", "NPULAB_PROFILE_MAX_BYTES", "trace")
        # On every run page, not only those of kinds with the profiling capability (which
        # capture traces): a trace may be imported for a run of any kind.
        add_panel(Panel(TEMPLATE, panel_context))
        # The run page leads with the newest summary's top findings, whatever the kind.
        from npulab.profiles import headline
        from npulab.runs.kinds import HeadlinePanel
        from npulab.runs.pages import add_headline

        add_headline(HeadlinePanel(headline.TEMPLATE, headline.headline_context))
        # The capability (workers.contract.capabilities.PROFILING) asks nothing more of the
        # generic run code: a captured trace is an artifact, made a profile once stored.
        from npulab.runs import capabilities
        from workers.contract.capabilities import PROFILING

        capabilities.register(capabilities.Capability(PROFILING))
        # A run's profile gives the upgrade review its step time, whatever the run's kind.
        from npulab.profiles import evidence
        from npulab.runs import evidence as run_evidence

        run_evidence.register(evidence.SOURCE, evidence.step_times)
