"""MCP resources: every note as `engrama://note/{path}`, the brief as `engrama://brief`, and list changes.

- A note resource is the file's exact bytes, read from the disk when it is read: `text/markdown` text decoded
  as UTF-8 with nothing changed (a BOM stays as U+FEFF, CRLF stays CRLF), so encoding the text as UTF-8 gives
  the file back byte for byte. A note that is not valid UTF-8 comes as a blob (base64) of its bytes, so that
  nothing is replaced or lost either. Paths follow `server.services.reading`: outside the vault, dot-folders,
  non-Markdown files and conflict copies are refused with a message saying why.
- `resources/list` pages through the vault's notes, sorted by path (`PAGE_SIZE` a page; the cursor is the last
  path of the page, so notes created meanwhile shift nothing). The first page walks the vault; the pages after
  it reuse that walk while no note came or went (and for at most `LISTING_TTL` seconds, since a process
  without the vault's lease does not watch), so paging through 100,000 notes walks the vault once, not 500
  times. A page's sizes are read afresh. The brief leads the first page. The notes are
  also offered as the template `engrama://note/{+path}` (`+`: the path keeps its slashes).
- When the watcher sees notes come or go (created, deleted, moved or renamed; not on an edit), the server sends
  `notifications/resources/list_changed`: to each connected client on the handshake protocol (the stdio
  session, kept from its `notifications/initialized`) and on the SDK's subscription bus for `subscriptions/listen` streams.
  Only the process holding the vault's lease watches, so only it sends them.

The SDK's `resources/list` lists registered resources only and has no pagination; the middleware below answers
it instead, keeping the SDK's envelope. It also says `listChanged: true` in the `initialize` answer, which the
high-level server leaves false.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import logging
import time
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from server.runtime import NoVaultConfigured, Runtime
from server.services.brief import render_brief
from server.services.errors import ServiceError
from server.services.reading import list_notes, note_bytes
from server.tools.brief import MAX_BUDGET, MIN_BUDGET, client_name
from server.tools.common import AppContext
from vault_sync.errors import VaultError

log = logging.getLogger(__name__)

NOTE_PREFIX = "engrama://note/"
NOTE_TEMPLATE = NOTE_PREFIX + "{+path}"
BRIEF_URI = "engrama://brief"
MARKDOWN = "text/markdown"
PAGE_SIZE = 200  # notes per resources/list page: ~25 KB of JSON, a fraction of a second to list
LISTING_TTL = 60.0  # seconds a walk of the vault serves the pages after the first


class ResourceEvents:
    """Who to tell when the vault's notes come and go, and telling them (coalesced: one message per burst)."""

    def __init__(self) -> None:
        self.bus = (
            InMemorySubscriptionBus()
        )  # the server's bus for `subscriptions/listen` (2026-07-28 clients)
        self._sessions: list[ServerSession] = []
        self._sending: asyncio.Task[None] | None = None
        self.generation = 0  # counts the times notes came or went (a listing walked before is out of date)

    def keep(self, session: ServerSession) -> None:
        """Remember a client's connection by the session of its `notifications/initialized`: what is sent
        through it later goes out on the connection's own channel."""
        self._sessions = [*self._sessions[-7:], session]  # a few at most; stdio has one

    def notes_changed(self) -> None:
        """Called by the live reconciler when notes were created, deleted or moved (on the event loop)."""
        self.generation += 1
        if self._sending is None or self._sending.done():
            self._sending = asyncio.get_running_loop().create_task(self._send(), name="engrama-list-changed")

    async def _send(self) -> None:
        await self.bus.publish(ResourcesListChanged())
        for session in list(self._sessions):
            try:
                await session.send_resource_list_changed()
            except Exception as exc:  # a client that went away: forget it (outermost handler of this task)
                log.debug("could not send resources/list_changed: %s", exc)
                self._sessions = [kept for kept in self._sessions if kept is not session]


class NoteResources:
    """Server middleware: pages `resources/list` through the vault's notes, keeps sessions for notifications,
    and advertises `resources.listChanged`."""

    def __init__(self, events: ResourceEvents) -> None:
        self.events = events
        self._walked: tuple[int, float, list[str]] | None = None  # (generation, when, paths) of the last walk

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "notifications/initialized":  # once per connection (a session is made per message)
            self.events.keep(ctx.session)
        answer = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(answer, dict):
            resources = answer.get("capabilities", {}).get("resources")
            if isinstance(resources, dict):
                resources["listChanged"] = True
        elif ctx.method == "resources/list" and isinstance(answer, dict):
            cursor = (ctx.params or {}).get("cursor")
            rt = cast(AppContext, ctx.lifespan_context).rt
            entries, next_cursor = await self._page(rt, cursor)
            answer["resources"] = entries
            if next_cursor is not None:
                answer["nextCursor"] = next_cursor
        return answer

    async def _page(self, rt: Runtime, cursor: Any) -> tuple[list[dict[str, Any]], str | None]:
        after = _decode_cursor(cursor)
        entries: list[dict[str, Any]] = []
        if after is None:
            entries.append(
                {
                    "uri": BRIEF_URI,
                    "name": "brief",
                    "title": "Session brief",
                    "description": "What changed in the vault, active work and what waits for the person",
                    "mimeType": MARKDOWN,
                }
            )
        if rt.settings.vault is None:
            return entries, None
        paths = await self._paths(rt, fresh=after is None)
        start = bisect.bisect_right(paths, after) if after is not None else 0
        page = paths[start : start + PAGE_SIZE]
        sizes = await asyncio.to_thread(_sizes, rt.vault, page)
        entries.extend(
            {"uri": note_uri(path), "name": path, "mimeType": MARKDOWN, "size": sizes[path]}
            for path in page
            if path in sizes
        )
        more = start + PAGE_SIZE < len(paths)
        return entries, _encode_cursor(page[-1]) if more and page else None

    async def _paths(self, rt: Runtime, *, fresh: bool) -> list[str]:
        """The vault's note paths, sorted: walked for a first page, else the last walk while it holds."""
        walked = self._walked
        now = time.monotonic()
        if fresh or walked is None or walked[0] != self.events.generation or now - walked[1] > LISTING_TTL:
            try:
                notes = await list_notes(rt)
            except VaultError as exc:
                raise MCPError(code=INVALID_PARAMS, message=f"the vault cannot be listed: {exc}") from exc
            walked = (self.events.generation, now, [n.path for n in notes])
            self._walked = walked
        return walked[2]


def _sizes(vault: Path, paths: list[str]) -> dict[str, int]:
    """The current size of each note of a page; a note gone since the walk is left out."""
    sizes: dict[str, int] = {}
    for path in paths:
        try:
            sizes[path] = (vault / path).stat().st_size
        except OSError:
            continue
    return sizes


def note_uri(path: str) -> str:
    """The resource URI of the note at vault path `path` (percent-encoded; slashes kept)."""
    return NOTE_PREFIX + quote(path, safe="/")


def _encode_cursor(path: str) -> str:
    return base64.urlsafe_b64encode(path.encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: Any) -> str | None:
    if cursor is None:
        return None
    try:
        return base64.urlsafe_b64decode(str(cursor).encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise MCPError(
            code=INVALID_PARAMS, message="unknown cursor: pass the nextCursor of the previous resources/list"
        ) from None


def register_resources(mcp: MCPServer[Any]) -> None:
    """The note template and the brief."""

    # The path is checked by our own rules (reading.note_path), whose refusals say what to do; the SDK's
    # generic check would answer "Unknown resource" for `..` instead.
    @mcp.resource(
        NOTE_TEMPLATE,
        name="note",
        title="Vault note",
        description="A note of the vault, exactly as it is on disk (vault-relative path)",
        mime_type=MARKDOWN,
        security=ResourceSecurity(exempt_params={"path"}),
    )
    async def note(path: str, ctx: Context) -> str | bytes:
        rt = cast(AppContext, ctx.request_context.lifespan_context).rt
        try:
            _, data = await note_bytes(rt, path)
        except (ServiceError, VaultError, NoVaultConfigured) as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        try:
            return data.decode("utf-8")  # strict, BOM kept: the text is the file's bytes
        except UnicodeDecodeError:
            return data  # not UTF-8: a blob of the exact bytes rather than a lossy decoding

    @mcp.resource(
        BRIEF_URI + "{?cues,project,budget_tokens}",
        name="brief",
        title="Session brief",
        description="What changed in the vault since this client's last brief, active work, pending "
        "decisions; optional cues, project, budget_tokens",
        mime_type=MARKDOWN,
    )
    async def brief_resource(
        ctx: Context,
        cues: str | None = None,
        project: str | None = None,
        budget_tokens: str | None = None,
    ) -> str:
        rt = cast(AppContext, ctx.request_context.lifespan_context).rt
        try:
            budget = _budget(budget_tokens)
            # Reading a resource changes nothing: the client's "since" mark moves with the tool or prompt.
            done = await render_brief(
                rt,
                client=client_name(ctx),
                cues=cues,
                project=project,
                **({"budget_tokens": budget} if budget else {}),
            )
        except (ValueError, VaultError, NoVaultConfigured) as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
        return done.markdown


def _budget(given: str | None) -> int | None:
    """The brief resource's `budget_tokens`, held to what the tool takes (review 21d: 1 gave an empty brief, 0
    the default, "abc" Python's own words); None when not given."""
    if given is None or not given.strip():
        return None
    try:
        budget = int(given.strip())
    except ValueError:
        budget = None
    if budget is None or not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise ValueError(
            f"budget_tokens must be a whole number from {MIN_BUDGET} to {MAX_BUDGET}, not {given!r}"
        )
    return budget
