"""The filesystem sandbox a run executes in (bubblewrap), where the host has one.

The run user (workers.host.runuser) keeps a run from what only the worker may read;
it does not keep one run from another (they share the user) nor from files every user
may read. The sandbox does: a run starts in a mount namespace of its own where the
host's system folders are read-only, and of the worker's world only its own run
directory, checkpoint directory and home, the interpreter it runs in, the ``workers``
package, the site's own kinds and the host paths its spec names (and the site's
``NPULAB_SANDBOX_READ``) are mounted. The worker's work directory with the other runs,
its token file, the platform's ``var/`` (database, secret key) and ``/etc/npulab`` are
not there at all.

As root, bubblewrap mounts as root and ``setpriv`` then drops to the run user inside
the sandbox, so the mounted interpreter need not be reachable on the host's own paths
(a venv under ``/root``). As another user, bubblewrap makes an unprivileged user
namespace; the run stays that user.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import shutil
import subprocess
from typing import Iterable, Sequence

from workers.contract.kinds import EXTRA_KINDS_ENV
from workers.host.runuser import RunUser, RunUsers, last_words

log = logging.getLogger(__name__)

ON = "on"
OFF = "off"
AUTO = "auto"
MODES = (AUTO, ON, OFF)

# Read-only, or re-created as the same symlink on a merged-/usr system.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Configuration of the platform and of the worker, never a run's business.
HIDDEN_DIRS = ("/etc/npulab",)
# Accelerator device nodes a run must open (Ascend, NVIDIA, render nodes).
DEVICE_NODES = (
    "/dev/davinci*",
    "/dev/devmm_svm",
    "/dev/hisi_hdc",
    "/dev/svm0",
    "/dev/nvidia*",
    "/dev/dri",
)

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_ROOT = os.path.dirname(PACKAGE_DIR)


class SandboxError(Exception):
    """The sandbox was asked for (``on``) and cannot be used on this host."""


def _real(path: str) -> str:
    # bwrap follows a source's symlinks, but a destination with a symlink in it (a venv
    # folder that is a link) names a path that does not exist in the new root.
    return os.path.realpath(path)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def interpreter_dirs(python: str) -> list[str]:
    """The folders an interpreter needs: its prefix (a venv, a conda env) and, for a venv,
    the installation it was made from. Only folders that look like a Python prefix."""
    found: list[str] = []
    candidates = [python, _real(python)]
    for path in candidates:
        prefix = os.path.dirname(os.path.dirname(os.path.abspath(path)))
        config = os.path.join(prefix, "pyvenv.cfg")
        looks = os.path.isfile(config) or glob.glob(os.path.join(prefix, "lib", "python3*"))
        if looks or os.path.isdir(os.path.join(prefix, "conda-meta")):
            found.append(prefix)
        if os.path.isfile(config):
            home = _venv_home(config)
            if home:
                candidates.append(os.path.join(home, "python3"))
    return list(dict.fromkeys(found))


def site_kind_dirs() -> list[str]:
    """The folders of the site's own kinds (``NPULAB_KINDS``): the runner imports them."""
    found = []
    for name in os.environ.get(EXTRA_KINDS_ENV, "").split(","):
        top = name.strip().split(".")[0]
        if not top:
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found += list(spec.submodule_search_locations)
        elif spec is not None and spec.origin:
            found.append(os.path.dirname(spec.origin))
    return found


def _venv_home(config: str) -> str:
    try:
        with open(config, encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    return value.strip()
    except OSError:
        pass
    return ""


class Sandbox:
    """How runs on this host are confined: the bubblewrap argv to put before a command."""

    def __init__(
        self,
        bwrap: str,
        hidden: Sequence[str],
        extra_reads: Sequence[str] = (),
        setpriv: str = "",
        own_network: bool = False,
    ):
        self.bwrap = bwrap
        # Never mounted, nor any folder holding one of them (the work dir, the token file).
        self.hidden = [_real(path) for path in hidden if path]
        self.extra_reads = list(extra_reads)
        self.setpriv = setpriv
        # A network namespace of the run's own: its loopback (where its supervisor serves
        # the MLflow API) and nothing else, not even the host's 127.0.0.1.
        self.own_network = own_network

    def _allowed(self, path: str) -> bool:
        real = _real(path)
        if real == "/":
            return False
        # Neither a folder holding a hidden path nor one inside it (another run's folder).
        return not any(_within(hidden, real) or _within(real, hidden) for hidden in self.hidden)

    def argv(
        self,
        command: Sequence[str],
        python: str,
        writable: Iterable[str],
        readable: Iterable[str] = (),
        run_user: RunUser | None = None,
        cwd: str = "",
    ) -> list[str]:
        """``command`` inside the sandbox: ``writable`` read-write, ``readable`` and the
        interpreter's folders read-only, and nothing else of the worker's."""
        args = [self.bwrap, "--unshare-ipc", "--unshare-uts", "--hostname", "npulab-run"]
        if self.own_network:
            args.append("--unshare-net")
        for folder in SYSTEM_DIRS:
            if os.path.islink(folder):
                args += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]
        for folder in HIDDEN_DIRS:
            if os.path.isdir(folder):
                args += ["--tmpfs", folder]
        args += ["--ro-bind-try", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev"]
        # POSIX semaphores and shared memory (multiprocessing's locks, DataLoader workers,
        # msprobe at import) need a /dev/shm the run user may write: the run's own one.
        args += ["--perms", "01777", "--tmpfs", "/dev/shm"]  # noqa: S108 - the run's own
        for pattern in DEVICE_NODES:
            for node in sorted(glob.glob(pattern)):
                args += ["--dev-bind", node, node]
        args += ["--tmpfs", "/tmp"]  # noqa: S108 - a fresh one, the run's alone
        binds: list[tuple[str, str, str]] = []
        reads = [PACKAGE_DIR, *interpreter_dirs(python), *site_kind_dirs(), *self.extra_reads]
        reads += readable
        for path in dict.fromkeys(reads):
            if not os.path.exists(path):
                continue
            if not self._allowed(path):
                log.warning("sandbox: not mounting %s, it holds the worker's own files", path)
                continue
            binds += _binds("--ro-bind", path)
        for path in writable:
            binds += _binds("--bind", path)
        # The folders above a mount point: bubblewrap would make them for root alone.
        made = {"/", *SYSTEM_DIRS}
        for _, _, destination in binds:
            folder = os.path.dirname(destination)
            ancestors = []
            while folder not in made and not any(_within(folder, top) for top in SYSTEM_DIRS):
                ancestors.append(folder)
                made.add(folder)
                folder = os.path.dirname(folder)
            for ancestor in reversed(ancestors):
                args += ["--perms", "0755", "--dir", ancestor]
        # A folder before what is mounted inside it.
        for option, source, destination in sorted(binds, key=lambda bind: bind[2].count("/")):
            args += [option, source, destination]
        if cwd:
            args += ["--chdir", cwd]
        args.append("--")
        if run_user is not None and os.geteuid() == 0:
            args += self.drop(run_user)
        return args + list(command)

    def drop(self, run_user: RunUser) -> list[str]:
        """``setpriv`` to the run user, no capabilities and no new privileges left."""
        groups = ",".join(str(gid) for gid in run_user.groups) or str(run_user.gid)
        return [
            self.setpriv,
            f"--reuid={run_user.uid}",
            f"--regid={run_user.gid}",
            f"--groups={groups}",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--nnp",
            "--",
        ]

    def check(self, python: str, work_dir: str, run_user: RunUser | None, timeout: float = 60.0):
        """SandboxError unless a run can start ``python`` in the sandbox and import the
        runner there, and cannot see ``work_dir``."""
        probe = f"import os, sys, workers.run\nsys.exit(3 if os.path.exists({work_dir!r}) else 0)\n"
        if self.own_network:
            # Only the loopback: a host whose kernel refuses a network namespace fails here.
            probe += "import socket\nsys.exit(0 if socket.if_nameindex() == [(1, 'lo')] else 4)\n"
        argv = self.argv([python, "-c", probe], python, writable=(), run_user=run_user, cwd="/")
        try:
            result = subprocess.run(
                argv,
                env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": PACKAGE_ROOT},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"bubblewrap cannot start: {exc}") from None
        if result.returncode == 3:
            raise SandboxError(f"the work directory {work_dir} is visible inside the sandbox")
        if result.returncode == 4:
            raise SandboxError("a run in the sandbox still sees the host's network interfaces")
        if result.returncode != 0:
            last = last_words(result)
            raise SandboxError(f"bubblewrap cannot run {python} in a sandbox: {last}")


def _binds(option: str, path: str) -> list[tuple[str, str, str]]:
    real = _real(path)
    binds = [(option, real, real)]
    absolute = os.path.abspath(path)
    if absolute != real:
        # The path as the run will name it, through the link (a venv folder that is one).
        binds.append((option, real, absolute))
    return binds


def resolve(
    mode: str,
    python: str,
    work_dir: str,
    hidden: Sequence[str],
    run_users: RunUsers | None,
    extra_reads: Sequence[str] = (),
    own_network: bool = False,
) -> Sandbox | None:
    """The sandbox ``mode`` asks for, checked as one of ``run_users`` under its lease;
    None where there is none (``off``, or ``auto`` on a host without a working
    bubblewrap: ``log`` says so). Runs kept off the network (``own_network``) need one:
    without it, SandboxError whatever the mode. RunUserError when no run user is free."""
    if own_network and mode == OFF:
        raise SandboxError("--run-network none needs the sandbox, and --sandbox is off")
    if mode == OFF:
        return None
    bwrap = shutil.which("bwrap") or ""
    setpriv = shutil.which("setpriv") or ""
    problem = ""
    if not bwrap:
        problem = "bubblewrap (bwrap) is not installed"
    elif run_users is not None and os.geteuid() == 0 and not setpriv:
        problem = "setpriv (util-linux) is not installed"
    sandbox = None
    if not problem:
        sandbox = Sandbox(bwrap, [work_dir, *hidden], extra_reads, setpriv, own_network)
        # A pool user only under its lease: another worker's lease ending on it, or its
        # start-up finding it free, kills every process of it (and a killed probe in
        # ``auto`` would leave this worker's runs without the sandbox).
        lease = run_users.lease() if run_users is not None else None
        try:
            sandbox.check(python, work_dir, lease.user if lease is not None else None)
        except SandboxError as exc:
            problem = str(exc)
        finally:
            if lease is not None:
                lease.end([])
    if not problem:
        return sandbox
    if own_network:
        raise SandboxError(f"--run-network none needs the sandbox: {problem}")
    if mode == ON:
        raise SandboxError(problem)
    log.warning("runs execute without a filesystem sandbox: %s", problem)
    return None
