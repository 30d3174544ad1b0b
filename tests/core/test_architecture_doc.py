"""docs/architecture.md's picture of the layers is the import-linter contract, row for row."""

from __future__ import annotations

import re
import tomllib

from tests.paths import REPO_DIR


def drawn_layers() -> list[str]:
    text = (REPO_DIR / "docs" / "architecture.md").read_text()
    section = text[text.index("## Layers") :]
    block = section[section.index("```\n") + 4 :]
    block = block[: block.index("```")]
    rows = []
    for line in block.splitlines():
        # " site          urls | api_urls ..." or "               snapshots": the label is
        # the first word of a line that starts one column in, the apps come after it.
        label = re.match(r"^ (\S+)\s{2,}", line)
        rest = line[label.end() :] if label else line.strip()
        rows.append(" | ".join(part.strip() for part in rest.split("|")))
    return rows


def test_the_drawn_layers_are_the_contracts() -> None:
    document = tomllib.loads((REPO_DIR / "pyproject.toml").read_text())
    [layers] = [c for c in document["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    assert drawn_layers() == [
        " | ".join(p.strip() for p in row.split("|")) for row in layers["layers"]
    ]
