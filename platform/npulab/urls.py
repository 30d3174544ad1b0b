from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from npulab import extensions
from npulab.accounts.views import SignInView
from npulab.health import urls as health_urls
from npulab.hosts import urls as host_urls
from npulab.review import urls as review_urls
from npulab.snapshots import urls as snapshot_urls
from npulab.telemetry import urls as telemetry_urls

# The host pages of the apps above hosts join its namespace (hosts:host_history ...).
host_pages = [
    *host_urls.urlpatterns,
    *snapshot_urls.host_urlpatterns,
    *review_urls.host_urlpatterns,
    *health_urls.host_urlpatterns,
    *telemetry_urls.host_urlpatterns,
]

urlpatterns = [
    # First: host workers' requests are most of them, and a URL is matched against each
    # pattern in turn until one takes it (docs/benchmarks.md, "Ingestion per request").
    path("api/v1/", include("npulab.api_urls")),
    path("", include("npulab.web.urls")),
    path("runs/", include("npulab.runs.urls")),
    # The pages of the run kinds' and the capabilities' apps (coverage, profiles ...).
    *extensions.page_urlpatterns(),
    path("hosts/", include((host_pages, host_urls.app_name))),
    path("snapshots/", include("npulab.snapshots.urls")),
    path("projects/", include("npulab.projects.urls")),
    path("account/", include("npulab.accounts.urls")),
    path("login/", SignInView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # MLflow's REST tracking API for outside clients (docs/metrics.md).
    path("mlflow/", include("npulab.mlflow.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up code as a script file, not inline.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path(
        "api/redoc/",
        SpectacularRedocView.as_view(url_name="schema", template_name="core/redoc.html"),
        name="api-redoc",
    ),
]

# Under /api/, a request Django refuses before any view, an unknown URL and a crash are
# answered with an error body (code, detail).
handler400 = "npulab.core.api.bad_request"
handler404 = "npulab.core.api.not_found"
handler500 = "npulab.core.api.server_error"
