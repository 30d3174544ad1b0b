"""The project page's parts from the apps above projects (see ``npulab.core.pages``).

Runs adds the project's recent runs and their count.
"""

from __future__ import annotations

from npulab.core.pages import PageParts

project_page = PageParts("projects:project_detail")
