"""Named-user ACL entries written through the xattr, checked by the kernel itself."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.host import acl, runuser

NOBODY = pwd.getpwnam("nobody")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing to another user needs root")


def nobody_can_stat(path: Path) -> bool:
    """Whether the kernel lets nobody reach ``path`` (every folder above it searched)."""
    done = subprocess.run(
        [shutil.which("setpriv") or "setpriv", f"--reuid={NOBODY.pw_uid}",
         f"--regid={NOBODY.pw_gid}", "--clear-groups", "--", "stat", str(path)],
        capture_output=True,
        check=False,
    )  # fmt: skip
    return done.returncode == 0


@pytest.fixture
def private() -> Iterator[Path]:
    """A folder only root may enter, holding a file everyone may read, under a folder
    everyone may pass (pytest's own tmp folders are root's alone)."""
    top = Path(os.environ.get("TMPDIR", "/tmp")) / f"npulab-acl-{os.getpid()}"
    top.mkdir(mode=0o755)
    folder = top / "private"
    folder.mkdir(mode=0o700)
    (folder / "f").write_text("x")
    (folder / "f").chmod(0o644)
    yield folder
    shutil.rmtree(top)


def test_a_search_entry_lets_one_user_through_and_is_taken_off_again(private: Path) -> None:
    if acl_unsupported(private):
        pytest.skip("this filesystem keeps no ACLs")
    assert not nobody_can_stat(private / "f")
    acl.allow(str(private), NOBODY.pw_uid, acl.SEARCH)
    assert acl.user_permissions(str(private), NOBODY.pw_uid) == acl.SEARCH
    assert nobody_can_stat(private / "f")
    # Search only: the mode bits others see are unchanged, listing is still refused.
    assert os.stat(private).st_mode & 0o007 == 0
    acl.remove_user(str(private), NOBODY.pw_uid)
    assert acl.user_permissions(str(private), NOBODY.pw_uid) == 0
    assert not nobody_can_stat(private / "f")
    assert os.stat(private).st_mode & 0o777 == 0o700


def test_a_chmod_that_masks_the_entry_is_seen_and_granted_again(private: Path) -> None:
    if acl_unsupported(private):
        pytest.skip("this filesystem keeps no ACLs")
    acl.allow(str(private), NOBODY.pw_uid, acl.SEARCH)
    private.chmod(0o700)  # the mask takes the group bits: nothing
    assert acl.user_permissions(str(private), NOBODY.pw_uid) == 0
    assert not nobody_can_stat(private / "f")
    assert runuser.grant_traverse("nobody", [str(private / "f")]) == [str(private)]
    assert nobody_can_stat(private / "f")


def test_other_entries_are_kept(private: Path) -> None:
    if acl_unsupported(private):
        pytest.skip("this filesystem keeps no ACLs")
    daemon = pwd.getpwnam("daemon").pw_uid
    acl.allow(str(private), daemon, acl.SEARCH)
    acl.allow(str(private), NOBODY.pw_uid, acl.SEARCH)
    acl.remove_user(str(private), NOBODY.pw_uid)
    assert acl.user_permissions(str(private), daemon) == acl.SEARCH
    entries = acl.read(str(private))
    assert entries[(acl.USER_OBJ, 0xFFFFFFFF)] == 0o7
    assert entries[(acl.MASK, 0xFFFFFFFF)] == acl.SEARCH


def test_the_attribute_is_in_the_kernels_format(private: Path) -> None:
    if acl_unsupported(private):
        pytest.skip("this filesystem keeps no ACLs")
    acl.allow(str(private), NOBODY.pw_uid, acl.SEARCH)
    raw = os.getxattr(str(private), acl.XATTR)
    assert raw[:4] == (2).to_bytes(4, "little")
    assert len(raw) == 4 + 8 * 5  # owner, nobody, group, mask, others
    # getfacl's view, where the acl package is installed.
    if shutil.which("getfacl"):
        shown = subprocess.run(["getfacl", "-p", str(private)], capture_output=True, text=True)
        assert "user:nobody:--x" in shown.stdout


def acl_unsupported(path: Path) -> bool:
    try:
        acl.write(str(path), acl.read(str(path)))
    except acl.AclUnsupported:
        return True
    return False
