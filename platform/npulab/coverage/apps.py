from django.apps import AppConfig


class CoverageConfig(AppConfig):
    """The coverage run kind on the web side (its declaration: workers/kinds/coverage/)."""

    name = "npulab.coverage"
    label = "coverage"
    verbose_name = "Operator coverage"
    # Its pages hang under a run: /runs/<id>/coverage/.
    url_prefix = "runs/"

    def ready(self) -> None:
        from npulab.coverage.ingest import on_op_result, on_plan
        from npulab.coverage.kind import COVERAGE
        from npulab.runs import events, kinds
        from workers.kinds.coverage import COVERAGE_PLAN, OP_RESULT

        kinds.register(COVERAGE)
        events.register_handler(COVERAGE_PLAN, on_plan)
        events.register_handler(OP_RESULT, on_op_result)
