from django.apps import AppConfig


class EchoConfig(AppConfig):
    """The test-only echo kind's web side, registered the way every kind's app registers."""

    name = "tests.kinds.echo"
    label = "echo"
    # Its page hangs under a run: /runs/<id>/echo/ (mounted by npulab.extensions).
    url_prefix = "runs/"

    def ready(self) -> None:
        from npulab.runs import events, kinds
        from tests.kinds.echo import ECHO
        from tests.kinds.echo.kind import ECHO_KIND, on_echo

        kinds.register(ECHO_KIND)
        events.register_handler(ECHO, on_echo)
