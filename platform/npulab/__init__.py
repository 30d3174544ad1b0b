"""npulab: the web side (Django project and apps) of the platform."""

from npulab.celery import app as celery_app

__all__ = ["celery_app"]
