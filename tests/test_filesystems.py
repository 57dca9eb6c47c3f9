"""Which file systems get walked for changes beside the watcher (vault_sync.filesystems), read from the text
/proc/self/mountinfo has on the machines where it matters."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from server.settings import ConfigError, build_settings
from vault_sync.filesystems import is_remote, mount_type, remote_file_system

# WSL 2 (Windows drives through 9p), an NFS home with an sshfs mount inside it, a name with a space.
MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/sdc rw,discard
70 27 0:50 / /mnt/c rw,noatime - 9p drvfs rw,aname=drvfs;path=C:\\;uid=1000
80 27 0:60 / /home rw,relatime shared:5 - nfs4 server:/export/home rw,vers=4.2
81 80 0:61 / /home/ana/remote rw,nosuid - fuse.sshfs ana@box:/srv rw,user_id=1000
82 27 8:3 / /media/ana/My\\040Disk rw,relatime - fuseblk /dev/sda3 rw,user_id=0
83 27 0:62 / /media/ana/Shared\\040Vault rw - cifs //nas/vault rw
"""


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/mnt/c/Users/ana/Vault", "9p"),
        ("/mnt/cold/Vault", "ext4"),  # /mnt/c is not a prefix of /mnt/cold
        ("/home/ana/Vault", "nfs4"),
        ("/home/ana/remote/Vault", "fuse.sshfs"),  # the innermost mount
        ("/media/ana/My Disk/Vault", "fuseblk"),
        ("/media/ana/Shared Vault", "cifs"),
        ("/", "ext4"),
    ],
)
def test_the_mount_holding_a_path_is_the_longest_mount_point_before_it(path: str, kind: str) -> None:
    assert mount_type(MOUNTINFO, path) == kind


def test_shares_from_elsewhere_are_remote_and_local_disks_are_not() -> None:
    assert all(is_remote(k) for k in ("9p", "nfs4", "cifs", "fuse.sshfs", "fuse.rclone", "virtiofs"))
    assert not any(is_remote(k) for k in ("ext4", "btrfs", "xfs", "tmpfs", "overlay", "fuseblk", "apfs"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/mountinfo")
def test_a_vault_on_this_machines_own_disk_is_not_walked(tmp_path: Path) -> None:
    kind = mount_type(Path("/proc/self/mountinfo").read_text(encoding="utf-8"), str(tmp_path.resolve()))
    assert kind is not None
    assert remote_file_system(tmp_path) == (kind if is_remote(kind) else None)


def test_the_walks_setting_is_checked(vault: Path) -> None:
    assert build_settings({"vault": str(vault)}, {"ENGRAMA_POLL_SECONDS": "0"}).poll == 0
    assert build_settings({"vault": str(vault)}, {"ENGRAMA_POLL_SECONDS": "10"}).poll == 10
    assert build_settings({"vault": str(vault)}, {}).poll is None
    for bad in ("often", "0.5", "-3"):
        with pytest.raises(ConfigError, match="ENGRAMA_POLL_SECONDS"):
            build_settings({"vault": str(vault)}, {"ENGRAMA_POLL_SECONDS": bad})
