import logging

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "npulab.core"
    label = "core"
    verbose_name = "npulab core"

    def ready(self) -> None:
        # Registers the ``<id:…>`` path converter before any URL module is read.
        from npulab.core import converters  # noqa: F401
        from npulab.core.logs import OutageFilter

        # Celery logs a failed task, beat a message it could not send, a worker an ack
        # that did not reach the broker and the control tick a pass that failed on these
        # loggers, with its own handlers, which the LOGGING setting does not reach: the
        # filter goes on the loggers.
        loggers = ("celery.app.trace", "celery.beat", "celery.worker.request", "npulab.core.tasks")
        for name in loggers:
            logging.getLogger(name).addFilter(OutageFilter())
