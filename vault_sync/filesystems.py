"""Whether a file watcher on the vault's file system sees every change made to its notes.

A watcher (inotify on Linux, FSEvents on macOS) reports what this machine's kernel does to files. On a network
share (NFS, SMB), a folder shared into WSL or a virtual machine from the host (9p, virtiofs, vboxsf), or a FUSE
file system (sshfs, rclone, cloud drives), files also change elsewhere: on the server, on the host, in the cloud,
and no event comes for that. Obsidian on Windows editing a vault that an engrama-vault under WSL reads through
`/mnt/c` is the common case. On such a file system the vault is also walked for changes
(`debounce.LiveReconciler.polling`), as when the OS refuses a watcher.

Windows is left out: ReadDirectoryChangesW is answered by the SMB server for changes made by others.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

# Linux file system types (the third-to-last field of /proc/self/mountinfo) whose files change without this
# kernel seeing it. FUSE counts (its daemon can change files by itself), except `fuseblk`: a local disk
# (NTFS through ntfs-3g) that only this machine writes.
REMOTE_TYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ncpfs",
        "afs",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "9p",  # WSL 2's /mnt/c, QEMU and Lima shares
        "drvfs",  # WSL 1's /mnt/c
        "virtiofs",
        "vboxsf",
        "vmhgfs",
        "davfs",
        "fuse",
    }
)
# macOS file system type names of network volumes (also told apart by the mount not being MNT_LOCAL).
MAC_REMOTE_TYPES = frozenset({"smbfs", "nfs", "afpfs", "webdav", "cifs", "ftp", "macfuse", "osxfuse"})


def remote_file_system(path: Path) -> str | None:
    """The type of the file system holding `path` when a watcher there may miss changes made elsewhere (e.g.
    "nfs4", "9p", "fuse.sshfs"), else None (also when it cannot be told)."""
    try:
        real = os.path.realpath(path)
        if sys.platform.startswith("linux"):
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
                kind = mount_type(f.read(), real)
            return kind if kind is not None and is_remote(kind) else None
        if sys.platform == "darwin":
            return _mac_remote(real)
    except (OSError, ValueError):
        return None
    return None


def is_remote(kind: str) -> bool:
    """Whether a Linux file system type is one whose files change without this kernel seeing it."""
    return kind in REMOTE_TYPES or (kind.startswith("fuse.") and kind != "fuseblk")


def mount_type(mountinfo: str, path: str) -> str | None:
    """The file system type of the mount holding the absolute `path`, from the text of /proc/self/mountinfo
    (the mount point that is the longest prefix of `path`; the last one listed wins, as it is mounted over)."""
    best, best_len = None, -1
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        separator = fields.index("-", 6)
        if len(fields) < separator + 2:
            continue
        point = _unescape(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            best, best_len = fields[separator + 1], len(point)
    return best


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as octal escapes (\\040)."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


class _MacStatfs(ctypes.Structure):
    """`struct statfs` of macOS with 64-bit inodes (<sys/mount.h>), the layout since 10.6 and on arm64."""

    _fields_ = [
        ("f_bsize", ctypes.c_uint32),
        ("f_iosize", ctypes.c_int32),
        ("f_blocks", ctypes.c_uint64),
        ("f_bfree", ctypes.c_uint64),
        ("f_bavail", ctypes.c_uint64),
        ("f_files", ctypes.c_uint64),
        ("f_ffree", ctypes.c_uint64),
        ("f_fsid", ctypes.c_int32 * 2),
        ("f_owner", ctypes.c_uint32),
        ("f_type", ctypes.c_uint32),
        ("f_flags", ctypes.c_uint32),
        ("f_fssubtype", ctypes.c_uint32),
        ("f_fstypename", ctypes.c_char * 16),
        ("f_mntonname", ctypes.c_char * 1024),
        ("f_mntfromname", ctypes.c_char * 1024),
        ("f_flags_ext", ctypes.c_uint32),
        ("f_reserved", ctypes.c_uint32 * 7),
    ]


MNT_LOCAL = 0x00001000


def _mac_remote(path: str) -> str | None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.dylib", use_errno=True)
    try:
        statfs = libc["statfs$INODE64"]  # x86_64: the 64-bit-inode variant has its own symbol
    except AttributeError:
        statfs = libc["statfs"]
    statfs.argtypes = [ctypes.c_char_p, ctypes.POINTER(_MacStatfs)]
    statfs.restype = ctypes.c_int
    buf = _MacStatfs()
    if statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        return None
    kind = buf.f_fstypename.decode("ascii", "replace")
    if not kind.isprintable() or not kind:
        return None  # not the layout expected: say nothing rather than guess
    return kind if kind in MAC_REMOTE_TYPES or not buf.f_flags & MNT_LOCAL else None
