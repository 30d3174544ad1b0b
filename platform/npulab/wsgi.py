"""WSGI entry point for gunicorn: ``gunicorn npulab.wsgi``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "npulab.settings")

application = get_wsgi_application()
