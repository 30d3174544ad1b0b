"""A fake command-line tool on PATH that answers with given outputs, for the device tools.

A fake is a shell script that logs its arguments and answers each argument
pattern (a shell ``case`` glob) with a file's bytes on stdout and stderr and an exit
code, or hangs. Tests give it real captured outputs (tests/fixtures/).
"""

from __future__ import annotations

import shlex
import stat
from pathlib import Path


class FakeTool:
    """One fake executable in ``directory``; ``answer`` adds a rule, ``calls`` reads the log."""

    def __init__(self, directory: Path, name: str):
        self.directory = directory
        self.name = name
        self.path = directory / name
        self.log = directory / f"{name}.calls"
        self.hang_pid = directory / f"{name}.hang.pid"  # the hanging child's pid
        self.rules: list[str] = []
        self._outputs = 0
        self._write()

    def answer(
        self,
        pattern: str,
        output: str | Path | None = None,
        code: int = 0,
        hang: bool = False,
        stderr: str | Path | None = None,
    ) -> FakeTool:
        """Answer arguments matching ``pattern`` (rules match in the order added).

        ``output`` goes to stdout, or to stderr when the exit ``code`` is not 0 and no
        ``stderr`` is given; a tool that writes to both gets both.
        """
        body = []
        if hang:
            # A child that would outlive a kill of the script alone, holding the pipes open.
            body.append(f"sleep 600 & echo $! > {shlex.quote(str(self.hang_pid))}; wait")
        if output is not None:
            stream = " >&2" if code and stderr is None else ""
            body.append(f"cat {shlex.quote(str(self._file(output)))}{stream}")
        if stderr is not None:
            body.append(f"cat {shlex.quote(str(self._file(stderr)))} >&2")
        body.append(f"exit {code}")
        self.rules.append(f"  {pattern}) {'; '.join(body)};;")
        self._write()
        return self

    def _file(self, output: str | Path) -> Path:
        """A file holding ``output``: itself if it is one."""
        if isinstance(output, Path):
            return output
        self._outputs += 1
        target = self.directory / f"{self.name}.out{self._outputs}"
        target.write_text(output, encoding="utf-8")
        return target

    def calls(self) -> list[str]:
        if not self.log.exists():
            return []
        return self.log.read_text(encoding="utf-8").splitlines()

    def _write(self) -> None:
        script = [
            "#!/bin/sh",
            f'echo "$*" >> {shlex.quote(str(self.log))}',
            'case "$*" in',
            *self.rules,
            '  *) echo "Error: unknown parameters: $*" >&2; exit 1;;',
            "esac",
        ]
        self.path.write_text("\n".join(script) + "\n", encoding="utf-8")
        self.path.chmod(self.path.stat().st_mode | stat.S_IEXEC)
