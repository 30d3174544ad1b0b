"""The host page's parts from the apps above hosts (see ``npulab.core.pages``).

Runs adds each device's lease and the recent runs; snapshots adds the
environment and its history.
"""

from __future__ import annotations

from npulab.core.pages import PageParts

host_page = PageParts("hosts:host_detail")
