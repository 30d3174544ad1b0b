"""Each rank's output prefixed with its rank on its way to the supervisor (the log's rank
selector), whoever writes it: Python, the C library, a child process; and its last lines
still come when the rank is being stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from tests.paths import REPO_DIR
from workers.contract.ranks import line_rank

PREFIXED = textwrap.dedent(
    r"""
    import os, signal, sys, time
    from workers.training.rank_output import mark_output
    mark_output(3)
    if len(sys.argv) > 1:
        def stop(signum, frame):
            # As a training loop's handler says where it stopped, on its way out.
            print("stopped at step 7", flush=True)
            sys.exit(1)
        signal.signal(signal.SIGTERM, stop)
        print("waiting", flush=True)
        time.sleep(60)
    print("from python")
    print("to stderr", file=sys.stderr)
    os.write(1, b"from the C level\n")
    os.system("echo from a child")
    sys.stdout.write("no newline at the end")
    """
)


def run_prefixed(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PREFIXED, *args],
        env=dict(os.environ, PYTHONPATH=str(REPO_DIR), PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_every_line_a_rank_prints_carries_its_rank() -> None:
    process = run_prefixed()
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0
    assert stdout.decode().splitlines() == [
        "[rank3]: from python",
        "[rank3]: from the C level",
        "[rank3]: from a child",
        "[rank3]: no newline at the end",
    ]
    assert stderr.decode().splitlines() == ["[rank3]: to stderr"]


def test_a_rank_being_stopped_still_gets_its_last_lines_out() -> None:
    process = run_prefixed("wait")
    assert process.stdout is not None
    seen = b""
    while b"waiting" not in seen:
        seen += os.read(process.stdout.fileno(), 4096)
    # The run's stop signals the whole group: the rank and its helper alike.
    os.killpg(process.pid, signal.SIGTERM)
    rest, _ = process.communicate(timeout=60)
    # The helper outlived the signal: the rank's last line came through.
    assert (seen + rest).decode().splitlines() == ["[rank3]: waiting", "[rank3]: stopped at step 7"]


def test_a_lines_rank_is_its_global_rank_prefix() -> None:
    assert line_rank("[rank12]: loss 0.5") == 12
    assert line_rank("plain") is None
    # torchrun's own --tee prefix names a local rank, not a global one.
    assert line_rank("[default1]:loss 0.5") is None
    assert line_rank("[rank1] no colon") is None
