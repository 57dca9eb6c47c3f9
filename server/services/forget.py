"""`engrama_forget`: archive an entity (reversible, the default) or purge it from the graph.

Archiving goes through the note, the truth (DESIGN §2): only its `status:` line is set to `archived`, and
the reconcile of that one path archives the node, so the archive survives a rebuild from the vault. Without
a note (no vault, a node that never had a note) the graph alone is archived. A process without the vault's
lease archives the graph and queues the note's line for the lease holder in the same transaction (the outbox,
`server.services.outbox`). Purging deletes the node and what hangs off it; the note stays unless
`delete_note` is given, and then it is moved to the vault's `.trash/` as Obsidian does, never unlinked (by
the lease holder, through the outbox, when this process does not hold the lease).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from server.runtime import Runtime
from server.services.entities import (
    frontmatter_of,
    locate_entity_note,
    reconcile_moved,
    require_note_of,
    still_wanted,
    writes_notes,
)
from server.services.errors import EntityNotFound, ServiceError
from server.services.schema import optional_label, require_name
from server.store import Node, forget_sql, history_sql, outbox_sql
from server.store.clock import utc_now
from vault_sync import identify
from vault_sync.errors import MalformedNote
from vault_sync.model import FileState
from vault_sync.names import fold
from vault_sync.notes import update_note
from vault_sync.outbox import ArchiveChange, TrashChange
from vault_sync.report import FAILED
from vault_sync.writer import Quiet, edit_note_aside, move_to_trash, read_note, trash_aside

log = logging.getLogger(__name__)

MODES = ("archive", "purge")
REASON = "forgotten with engrama_forget"
ARCHIVED = "archived"


@dataclass(frozen=True)
class Forgotten:
    id: str
    label: str
    name: str
    mode: str
    status: str  # "archived" or "purged"
    path: str | None  # the entity's note, vault-relative; None when it has none
    trash_path: str | None  # where the note went, when purge moved it to the trash
    changed: bool
    message: str


async def forget(
    rt: Runtime, name: str, label: str | None = None, mode: str = "archive", delete_note: bool = False
) -> Forgotten:
    """Archive (default) or purge the entity called `name`; see the module docstring for what each does."""
    mode = mode.strip().lower() if isinstance(mode, str) else ""
    if mode not in MODES:
        raise ServiceError(
            f"unknown mode {mode!r}; use archive (hide it, reversible; the default) "
            "or purge (delete it from the graph)"
        )
    if delete_note and mode != "purge":
        raise ServiceError(
            "delete_note applies to mode=purge only; archiving never removes a note. "
            "Call again without delete_note, or with mode=purge"
        )
    from server.services.outbox import any_waiting, in_order  # here: the outbox applies forgets through this

    node = await _resolve(rt, name, label)
    if await any_waiting(rt):  # what another client's server queued about it lands first (a remember, say)
        await in_order(rt, node)
        node = await _resolve(rt, name, label)
    if mode == "archive":
        return await _archive(rt, node)
    return await _purge(rt, node, delete_note)


async def _resolve(rt: Runtime, name: str, label: str | None) -> Node:
    """The entity to forget: the best match for `name` (aliases too, archived ones last)."""
    name = require_name(name)
    canonical = optional_label(rt.profile, label, for_writing=False)
    nodes = await rt.store.find_nodes(name, canonical, include_archived=True)
    if not nodes:
        within = f" with label {canonical}" if canonical else ""
        raise EntityNotFound(
            f"no entity called {name!r}{within}; call engrama_search (include_archived=true finds archived "
            "ones too) to find its exact name, then call engrama_forget again"
        )
    first = nodes[0]
    # Forgetting the wrong one of two same-named entities is worse than asking; of one label too (review 23f:
    # of Projects/Atlas.md and Projects/2023/Atlas.md, one was archived without a word).
    # A namesake of the same label is one only by its own name (review 23j: a note listing the name as an
    # alias is not the entity asked for; an exact name outranks it).
    rivals = [
        n
        for n in nodes[1:]
        if n.status == first.status and (n.label != first.label or fold(n.name) == fold(first.name))
    ]
    if rivals:
        which = ", ".join(f"a {n.label}" + (f" ({n.path})" if n.path else "") for n in [first, *rivals])
        example = next((n.path[:-3] for n in [first, *rivals] if n.path and n.path.endswith(".md")), None)
        choose = [] if canonical or all(n.label == first.label for n in rivals) else ["pass label to choose"]
        if example:
            choose.append(f"pass the note's path as name (such as {example!r})")
        raise ServiceError(
            f"{len(rivals) + 1} entities are called {name!r}: {which}; " + ", or ".join(choose)
        )
    return first


def _forgotten(
    node: Node, mode: str, changed: bool, message: str, trash_path: str | None = None
) -> Forgotten:
    return Forgotten(
        id=node.id,
        label=node.label,
        name=node.name,
        mode=mode,
        status="purged" if mode == "purge" else ARCHIVED,
        path=node.path,
        trash_path=trash_path,
        changed=changed,
        message=message,
    )


# --- archive -------------------------------------------------------------------------------------------------


async def _archive(rt: Runtime, node: Node) -> Forgotten:
    if node.status == ARCHIVED:
        return _forgotten(node, "archive", False, f"{node.name!r} is already archived; nothing changed")
    if node.status == "stub":
        raise ServiceError(
            f"{node.name!r} has no note: it is only named by links in other notes, so there is nothing to "
            "archive. It stays a name while those notes link to it: remove the links to forget it (mode=purge "
            "drops what tools recorded about it)"
        )
    if writes_notes(rt) and node.path:
        return await _archive_note(rt, node, node.path)
    return await _archive_graph(rt, node)


async def _archive_note(
    rt: Runtime, node: Node, rel: str, base: Mapping[str, Any] | None = None
) -> Forgotten:
    """Set `status: archived` in the note (that line only), then reconcile it so the node follows. With `base`
    (a queued archive's: the status the node had when it was queued), a status the note holds now that is
    neither that nor `archived` was set since and is left as it is, judged on the very bytes the write edits
    (review 22i)."""
    since, today = utc_now(), date.today().isoformat()
    recorded = await rt.store.file_state(rel)

    def its_note(data: bytes, read: FileState) -> None:
        # Its id line, or none yet and what the graph read there as its note (a note still owed its line, one
        # whose frontmatter cannot take it): review 21c, such notes were refused with advice that never helped.
        require_note_of(data, read, node.id, rel, recorded)

    left: dict[str, Any] = {}  # the status the person set since the archive was queued, as the last edit saw

    def edit(data: bytes) -> bytes:  # pure: the writer re-runs it when the note changed meanwhile
        held = frontmatter_of(data)
        wanted, _ = still_wanted({"status": ARCHIVED}, (), base, held)
        left.clear()
        if not wanted:
            left["status"] = held.get("status")
            return data
        edited = update_note(data, properties=wanted, observation=None, today=today)
        if identify.read_id(edited) is None:  # the line it was owed goes in with the change, as a tool's does
            edited = identify.insert_id(edited, node.id)
        return edited

    try:
        await edit_note_aside(rt.vault, rel, edit, quiet=await rt.quiet_rule(rel), check=its_note)
    except MalformedNote as exc:  # IdLineRefused too: JSON frontmatter, a one-line mapping
        raise ServiceError(f"{rel} was left alone: {exc}; {_BY_HAND}") from exc
    except FileNotFoundError:
        found = await locate_entity_note(rt, node)
        if found is not None and not found.in_trash:  # moved or renamed a moment ago: archive it there
            return await _archive_note(rt, await reconcile_moved(rt, node, found.path), found.path)
        await rt.require_sync().sync_path(rel)  # a deleted note archives its node (DESIGN §2)
        return _forgotten(
            node, "archive", True, f"{rel} is no longer in the vault, so {node.name!r} is archived"
        )
    outcome = await rt.require_sync().sync_path(rel)
    if left:  # the graph follows the note, as the person set it (review 22a)
        log.info(
            "a queued archive of %s leaves its status as it is: the note says %s", node.name, left["status"]
        )
        return _forgotten(
            node, "archive", False, f"{rel} says `status: {left['status']}`, set since; left as it is"
        )
    after = await rt.store.get_node(node.id)
    if outcome.action == FAILED or after is None or after.status != ARCHIVED:
        raise ServiceError(
            f"{rel} now says `status: archived`, but the graph did not follow ({outcome.error or outcome.action}); "
            "call engrama_sync_note with this path"
        )
    await rt.store.write(history_sql.annotate, node.id, ["status"], since, REASON)
    return _forgotten(
        node,
        "archive",
        True,
        f"archived {node.name!r}: its note {rel} now says `status: archived` (no other byte changed), and "
        "search leaves it out unless include_archived is set. To bring it back, set `status:` in the note "
        "to what it was",
    )


_BY_HAND = "set `status: archived` in the note in Obsidian, and the graph follows"


async def _archive_graph(rt: Runtime, node: Node) -> Forgotten:
    """Archive in the graph; a note that another process must write gets its `status:` line through the outbox
    (in the same transaction), so the archive reaches the vault and survives a rebuild."""
    queue = node.path is not None and rt.sync is not None
    changed = await rt.store.write(outbox_sql.archive_and_queue, node.id, node.name, utc_now(), REASON, queue)
    if node.path is None:
        why = "it has no note, so it is archived in the graph"
    elif queue:
        why = (
            f"it is archived in the graph, and its note {node.path} is queued to say `status: archived`: "
            f"{_why_no_writes(rt)}, and writes it within about a second (engrama_status shows writes still "
            "waiting)"
        )
    else:
        why = (
            f"{_why_no_writes(rt)}, so it is archived in the graph only; its note {node.path} is unchanged, "
            "and the archive is undone when that note is next synced or the graph is rebuilt"
        )
    return _forgotten(node, "archive", changed, f"archived {node.name!r}: {why}")


async def apply_queued_archive(rt: Runtime, change: ArchiveChange) -> str | None:
    """The lease holder's half of a follower's archive: the note's `status:` line; returns the note's path.

    Raises ServiceError when the note cannot be written now (malformed, or it holds another entity); the
    outbox keeps the change and tries again."""
    node = await rt.store.get_node(change.node_id)
    if node is None or node.path is None:
        return None  # purged since, or it has no note: nothing is left to write
    await _archive_note(rt, node, node.path, base=change.base)
    return node.path


async def apply_queued_trash(rt: Runtime, change: TrashChange) -> str | None:
    """The lease holder's half of a follower's purge with delete_note: move the note to `.trash/` (when it
    still holds the purged entity) and purge whatever a sync brought back meanwhile; returns the trash path."""
    quiet = await rt.quiet_rule(change.path)
    trash_path = await trash_aside(functools.partial(_trash_if_held, rt.vault, change), quiet)
    await rt.store.write(
        forget_sql.purge_node, change.node_id, change.path if trash_path else None, utc_now()
    )
    return trash_path


def _trash_if_held(root: Path, change: TrashChange, quiet: Quiet | None) -> str | None:
    """Move the note at `change.path` to the trash if it still holds the purged entity, else leave it."""
    try:
        data, _ = read_note(root, change.path)
    except FileNotFoundError:
        return None  # gone already: moved by the person, or by an earlier attempt that was cut short
    if identify.read_id(data) != change.node_id:
        log.warning(
            "%s no longer holds the purged %r; it was left in place, not moved to the trash",
            change.path,
            change.name,
        )
        return None
    return move_to_trash(root, change.path, quiet=quiet)


def _why_no_writes(rt: Runtime) -> str:
    if rt.sync is None:
        return "no vault is configured"
    return "another engrama-vault process holds this vault's lease and is the one that writes notes"


# --- purge ---------------------------------------------------------------------------------------------------


async def _purge(rt: Runtime, node: Node, delete_note: bool) -> Forgotten:
    if delete_note and node.path and not writes_notes(rt):
        return await _purge_queued(rt, node, node.path)
    trash_path: str | None = None
    gone = False
    if delete_note and node.path:
        recorded = await rt.store.file_state(node.path)
        quiet = await rt.quiet_rule(node.path)
        try:
            trash_path = await trash_aside(
                functools.partial(_move_note_to_trash, rt.vault, node, node.path, recorded), quiet
            )
        except FileNotFoundError:
            gone = True
    drop_file = node.path if delete_note else None
    purged = await rt.store.write(forget_sql.purge_node, node.id, drop_file, utc_now())
    what = f"purged {node.name!r} from the graph with its {purged.relations} relation(s)"
    if purged.stubs:
        what += f" and {purged.stubs} placeholder(s) only it linked to"
    if purged.insights:
        what += f"; {purged.insights} pending insight(s) that named it were withdrawn"
    if node.path is None:
        note = "it had no note" + (
            "; the notes that still link to it keep it as a name (remove those links to forget it)"
            if node.status == "stub"
            else ""
        )
    elif trash_path is not None:
        note = f"its note moved from {node.path} to {trash_path} (restore it from there in Obsidian)"
    elif gone:
        note = f"its note {node.path} was already gone from the vault"
    else:
        note = (
            f"its note {node.path} stays in the vault and is indexed again when it is edited or the graph is "
            "rebuilt; purging with delete_note=true moves the note to .trash as well, so delete it in "
            "Obsidian if it should go"
        )
    return _forgotten(node, "purge", True, f"{what}; {note}{_still_linked(purged)}", trash_path=trash_path)


def _still_linked(purged: forget_sql.Purged, shown: int = 5) -> str:
    """What the purge cannot take away: links in other notes still name the entity, so it stays a name (a
    placeholder) in the graph as long as they do (review 21c: the message said its relations were gone)."""
    if not purged.linked_from:
        return ""
    paths = ", ".join(purged.linked_from[:shown]) + (
        f" and {len(purged.linked_from) - shown} more" if len(purged.linked_from) > shown else ""
    )
    return (
        f"; {len(purged.linked_from)} note(s) still link to it ({paths}): the graph keeps its name as a "
        "placeholder while they do; remove those links or relations in the notes to forget it entirely"
    )


async def _purge_queued(rt: Runtime, node: Node, rel: str) -> Forgotten:
    """Purge on a process without the vault's lease: the graph now, the note's move to the trash queued for
    the lease holder (one transaction)."""
    if rt.sync is None:
        raise ServiceError(f"delete_note needs a vault: {_why_no_writes(rt)}; nothing was purged")
    purged = await rt.store.write(outbox_sql.purge_and_queue, node.id, node.name, rel, utc_now())
    return _forgotten(
        node,
        "purge",
        True,
        f"purged {node.name!r} from the graph with its {purged.relations} relation(s); its note {rel} is "
        f"queued to move to .trash: {_why_no_writes(rt)}, and moves it within about a second (engrama_status "
        f"shows writes still waiting){_still_linked(purged)}",
    )


def _move_note_to_trash(
    root: Path, node: Node, rel: str, recorded: FileState | None, quiet: Quiet | None
) -> str:
    """Move the entity's note into `.trash/` after checking the file still is that entity's note: its id line,
    or none and what the graph read there as its note (`entities.require_note_of`); once it is quiet."""
    data, read = read_note(root, rel)
    require_note_of(data, read, node.id, rel, recorded)
    return move_to_trash(root, rel, quiet=quiet)
