"""The snapshot page's parts from the apps above snapshots (see ``npulab.core.pages``).

Runs adds the runs that ran under the snapshot.
"""

from __future__ import annotations

from npulab.core.pages import PageParts

snapshot_page = PageParts("snapshots:snapshot_detail")
