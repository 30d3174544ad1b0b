"""A WSGI app that answers with the scheme gunicorn gave the request (test_forwarded.py)."""

from __future__ import annotations


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [environ["wsgi.url_scheme"].encode()]
