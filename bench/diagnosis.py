"""How fast ``npulab diagnose`` reads plogs, and that its memory stays flat in their size.

    python bench/diagnosis.py [--mb 1024] [--plain]

Writes a plog directory of the given size (INFO lines, one [ERROR] line in a thousand,
a real root cause near the end), or with ``--plain`` one plain log of training lines
(a run's own output), diagnoses it in a child process and prints JSON: seconds, MB/s
and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

INFO = (
    "[INFO] RUNTIME(1234,python3):2025-07-23-03:47:57.070.{n:03d} [runtime.cc:{n}] 1234 "
    "SubmitTask: stream_id=3, task_id={n}, task_type=0, mem alloc size={n}\n"
)
ERROR = (
    "[ERROR] RUNTIME(1234,python3):2025-07-23-03:47:57.070.463 [stream.cc:1044] 1234 "
    "GetError: AICORE Kernel task happen error, retCode=0x2a.\n"
)
ROOT = (
    "[ERROR] HCCL(2717288,python3):2025-07-23-03:47:57.070.463 [hccl_socket.cc:100] "
    "[2717288][HcclSocket][Listen] socket type[1], listen on ip[192.168.20.160] and specific "
    "port[16666] fail.\n"
)


def write_plogs(directory: str, megabytes: int) -> None:
    block = "".join(ERROR if n % 1000 == 999 else INFO.format(n=n) for n in range(20000)).encode()
    per_file = 128 * 1024 * 1024
    written, index = 0, 0
    while written < megabytes * 1024 * 1024:
        with open(os.path.join(directory, f"plog-{index}.log"), "wb") as handle:
            size = 0
            while size < per_file and written + size < megabytes * 1024 * 1024:
                handle.write(block)
                size += len(block)
            handle.write(ROOT.encode())
        written += size
        index += 1


PLAIN = "step {n} loss 0.{n:04d} lr 0.0001 throughput 1{n:03d} samples/s\n"
PLAIN_ROOT = "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0)\n"


def write_plain(directory: str, megabytes: int) -> None:
    block = "".join(PLAIN.format(n=n % 10000) for n in range(20000)).encode()
    with open(os.path.join(directory, "run.log"), "wb") as handle:
        written = 0
        while written < megabytes * 1024 * 1024:
            handle.write(block)
            written += len(block)
        handle.write(PLAIN_ROOT.encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--plain", action="store_true", help="a plain log, not plogs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        (write_plain if args.plain else write_plogs)(directory, args.mb)
        code = (
            "import json, resource, sys, time\n"
            "from workers.diagnosis import diagnose_paths\n"
            "start = time.perf_counter()\n"
            "found = diagnose_paths([sys.argv[1]], tables={})\n"
            "print(json.dumps({'seconds': time.perf_counter() - start, "
            "'category': found['root_cause']['category'], "
            "'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
        )
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", code, directory], capture_output=True, text=True, check=True
        ).stdout
        result = json.loads(out)
        result.update(
            mb=args.mb, mb_per_s=args.mb / result["seconds"], wall_s=time.perf_counter() - started
        )
        print(json.dumps(result))


if __name__ == "__main__":
    main()
