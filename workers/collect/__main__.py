"""``python -m workers.collect``: print a JSON environment snapshot of this host."""

from __future__ import annotations

import argparse
import json
import sys

from workers.collect.ascend import DEFAULT_ETC, DEFAULT_ROOT
from workers.collect.snapshot import collect


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.collect",
        description="Print a JSON snapshot of this host as seen from this interpreter.",
    )
    parser.add_argument(
        "--ascend-root", default=DEFAULT_ROOT, help="where CANN and the driver live"
    )
    parser.add_argument("--etc-dir", default=DEFAULT_ETC, help=argparse.SUPPRESS)
    parser.add_argument(
        "--npu-smi-output", metavar="FILE", help="read a saved `npu-smi info` instead of running it"
    )
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="skip importing torch_npu in a child process (fast, but blind to a missing CANN)",
    )
    args = parser.parse_args(argv)
    snapshot = collect(args.ascend_root, args.etc_dir, args.npu_smi_output, not args.no_probe)
    json.dump(snapshot, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
