from django.contrib import admin

from npulab.artifacts.models import Artifact, ArtifactUpload


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    """Read-only: artifacts change through uploads and the retention, not through this form."""

    list_display = ["id", "run", "kind", "name", "step", "bytes", "status", "pinned", "created"]
    list_filter = ["kind", "status", "pinned"]
    search_fields = ["run__id", "name", "sha256"]
    readonly_fields = [field.name for field in Artifact._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ArtifactUpload)
class ArtifactUploadAdmin(admin.ModelAdmin):
    """Uploads in progress and finished, with how many bytes are in."""

    list_display = ["id", "artifact", "bytes_received", "created", "updated"]
    readonly_fields = [field.name for field in ArtifactUpload._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
