"""Remove the temp files a killed writer left behind (`.engrama-tmp-*.tmp`, see `paths.make_temp_name`).

The safe writer puts each edit in a hidden temp file beside the note and renames it over the note; a process
killed in between (SIGKILL, power loss) leaves the temp file there, and sync clients upload it. Only the
process holding the vault's lease writes notes, so the moment it takes the lease no temp file of ours can be
in use any more: `remove_leftover_temps` is called then (before any write of its own) and removes them all.

Where the writer can put them: the folder of a note it edits or creates, which is the vault root or a folder
below it outside every dot-folder (it never edits notes in `.trash`; moving to the trash is a rename). So the
walk skips dot-folders (`.git`, `.obsidian`, `.trash`) and does not follow symlinked folders (their notes, and
so the writer's temp files, are in the folder the link points to, which the walk reaches by its real path).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from vault_sync.paths import is_engrama_temp

log = logging.getLogger(__name__)


def remove_leftover_temps(root: Path) -> int:
    """Remove every engrama temp file in the note folders of the vault at `root`; return how many went.

    Call it only while holding the vault's lease, before writing anything: a temp file is in use only while
    a writer that holds the lease is between writing it and renaming it. Folders that cannot be listed and
    files that cannot be removed are skipped (logged), never raised: a clean-up must not stop a start.
    """
    removed = 0
    pending = [os.path.abspath(root)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError as exc:
            log.debug("leftover temp files: cannot list %s (%s); skipped", folder, exc.strerror)
            continue
        for entry in listed:
            if entry.name.startswith("."):
                if is_engrama_temp(entry.name) and _remove(entry):
                    removed += 1
                continue  # dot-folders (.git, .obsidian, .trash) never hold our temp files
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
            except OSError:
                continue
    return removed


def _remove(entry: os.DirEntry[str]) -> bool:
    try:
        if not entry.is_file(follow_symlinks=False):
            return False  # our temp files are plain files; anything else with that name is not ours
        os.unlink(entry.path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("could not remove the leftover temp file %s: %s", entry.path, exc.strerror)
        return False
    return True
