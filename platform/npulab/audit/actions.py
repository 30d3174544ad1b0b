"""The actions the audit log records: each name written once, here, with what it means."""

from __future__ import annotations

RUN_SUBMIT = "run.submit"
RUN_CANCEL = "run.cancel"
RUN_RESTART = "run.restart"
SNAPSHOT_MARK_KNOWN_GOOD = "snapshot.mark_known_good"
SNAPSHOT_UNMARK_KNOWN_GOOD = "snapshot.unmark_known_good"
HOST_REQUEST_SNAPSHOT = "host.request_snapshot"
TOKEN_CREATE = "token.create"  # noqa: S105 - an action's name, not a secret
TOKEN_REVOKE = "token.revoke"  # noqa: S105 - an action's name, not a secret
HEALTH_DRAIN = "health.drain"
HEALTH_UNDRAIN = "health.undrain"
HEALTH_MARK_DEVICE_BAD = "health.mark_device_bad"
HEALTH_CLEAR_DEVICE = "health.clear_device"
POOL_CREATE = "pool.create"
PROJECT_CREATE = "project.create"
PROJECT_ADD_MEMBER = "project.add_member"
PROJECT_CHANGE_MEMBER = "project.change_member"
PROJECT_REMOVE_MEMBER = "project.remove_member"
HOST_MOVE_TO_POOL = "host.move_to_pool"
HOST_ACCEPT_DEVICES = "host.accept_devices"
USER_CREATE = "user.create"
USER_SET_ROLE = "user.set_role"
USER_SET_ACTIVE = "user.set_active"

LABELS = {
    RUN_SUBMIT: "submitted a run",
    RUN_CANCEL: "cancelled a run",
    RUN_RESTART: "restarted a run",
    SNAPSHOT_MARK_KNOWN_GOOD: "marked a snapshot known good",
    SNAPSHOT_UNMARK_KNOWN_GOOD: "took back a snapshot's known-good mark",
    HOST_REQUEST_SNAPSHOT: "asked a host for a snapshot",
    TOKEN_CREATE: "created an API token",
    TOKEN_REVOKE: "revoked an API token",
    HEALTH_DRAIN: "drained a host",
    HEALTH_UNDRAIN: "undrained a host",
    HEALTH_MARK_DEVICE_BAD: "marked a device bad",
    HEALTH_CLEAR_DEVICE: "cleared a device's bad mark",
    POOL_CREATE: "created a pool",
    PROJECT_CREATE: "created a project",
    PROJECT_ADD_MEMBER: "added a member to a project",
    PROJECT_CHANGE_MEMBER: "changed a project member's role",
    PROJECT_REMOVE_MEMBER: "removed a member from a project",
    HOST_MOVE_TO_POOL: "moved a host to a pool",
    HOST_ACCEPT_DEVICES: "accepted a host's device type and count",
    USER_CREATE: "created a user",
    USER_SET_ROLE: "changed a user's role",
    USER_SET_ACTIVE: "activated or deactivated a user",
}
