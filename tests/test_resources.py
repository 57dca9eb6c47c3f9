"""MCP resources through the real `engrama-vault serve` over stdio: notes listed (paged) and read byte for byte,
the template and the brief, `resources/list_changed` when a note appears, and paths that must be refused."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import BlobResourceContents, PaginatedRequestParams, TextResourceContents

from server.resources import PAGE_SIZE
from tests.test_e2e_stdio import COMMAND, serve_args

pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")

TRICKY = b"\xef\xbb\xbf---\r\ntype: Concept\r\n---\r\nCaf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve \xf0\x9f\x90\x9d\r\nno final newline"
NOT_UTF8 = b"---\ntype: Note\n---\nLatin-1 caf\xe9 and a stray \xff byte\n"


@asynccontextmanager
async def served(
    vault: Path, db_path: Path, tmp_path: Path, *, watch: bool = False, seen: list[str] | None = None
) -> AsyncIterator[ClientSession]:
    """A stdio session with the installed server; notification methods are appended to `seen`."""
    args = serve_args(vault, db_path) + ([] if watch else ["--no-watch"])

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if seen is not None and isinstance(method, str):
            seen.append(method)

    with open(tmp_path / "stderr.log", "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(StdioServerParameters(command=str(COMMAND), args=args), errlog=errlog) as (
                read,
                write,
            ),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            await session.initialize()
            yield session


def uri(path: str) -> str:
    return "engrama://note/" + quote(path, safe="/")


async def test_every_note_is_listed_across_pages_with_the_brief_first(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    count = PAGE_SIZE + 37
    (vault / "Inbox").mkdir()
    for i in range(count):
        (vault / "Inbox" / f"idea {i:03}.md").write_text(f"Idea number {i}.\n", encoding="utf-8")
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "workspace.md").write_text("not a note\n", encoding="utf-8")
    (vault / "picture.png").write_bytes(b"\x89PNG")
    async with served(vault, db_path, tmp_path) as session:
        first = await session.list_resources()
        assert first.resources[0].uri == "engrama://brief" and first.next_cursor is not None
        second = await session.list_resources(params=PaginatedRequestParams(cursor=first.next_cursor))
        assert second.next_cursor is None
        listed = [r for r in [*first.resources, *second.resources] if r.uri != "engrama://brief"]
        assert [r.uri for r in listed] == [uri(f"Inbox/idea {i:03}.md") for i in range(count)]
        assert all(r.mime_type == "text/markdown" for r in listed)
        assert listed[0].size == len("Idea number 0.\n")
        with pytest.raises(MCPError, match="cursor"):
            await session.list_resources(params=PaginatedRequestParams(cursor="not a cursor!"))


async def test_pages_after_the_first_follow_notes_that_come_and_go_while_paging(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """The pages after the first reuse the first page's walk of the vault, until the watcher sees a note come
    or go: then the next page is read from a fresh walk, so a note created or deleted meanwhile is listed or
    not as the vault now has it."""
    (vault / "Inbox").mkdir()
    for i in range(PAGE_SIZE + 20):
        (vault / "Inbox" / f"idea {i:03}.md").write_text(f"Idea number {i}.\n", encoding="utf-8")
    async with served(vault, db_path, tmp_path, watch=True) as session:
        first = await session.list_resources()
        assert first.next_cursor is not None
        (vault / "Inbox" / "zzz late idea.md").write_text("Written while paging.\n", encoding="utf-8")
        (vault / "Inbox" / f"idea {PAGE_SIZE + 5:03}.md").unlink()
        deadline = time.monotonic() + 20
        while True:
            second = await session.list_resources(params=PaginatedRequestParams(cursor=first.next_cursor))
            uris = {r.uri for r in second.resources}
            if uri("Inbox/zzz late idea.md") in uris or time.monotonic() > deadline:
                break
            await anyio.sleep(0.1)
        assert uri("Inbox/zzz late idea.md") in uris
        assert uri(f"Inbox/idea {PAGE_SIZE + 5:03}.md") not in uris
        assert {r.uri for r in first.resources} & uris == set()


async def test_a_note_resource_is_the_files_exact_bytes(vault: Path, db_path: Path, tmp_path: Path) -> None:
    (vault / "Concepts").mkdir()
    (vault / "Concepts" / "Café crème.md").write_bytes(TRICKY)
    (vault / "latin1.md").write_bytes(NOT_UTF8)
    async with served(vault, db_path, tmp_path) as session:
        templates = (await session.list_resource_templates()).resource_templates
        assert "engrama://note/{+path}" in {t.uri_template for t in templates}
        [text] = (await session.read_resource(uri("Concepts/Café crème.md"))).contents
        assert isinstance(text, TextResourceContents) and text.mime_type == "text/markdown"
        assert text.text.encode("utf-8") == TRICKY  # BOM, CRLF, accents, emoji, no final newline: all kept
        [blob] = (await session.read_resource(uri("latin1.md"))).contents
        assert isinstance(blob, BlobResourceContents)  # not UTF-8: the bytes, not a lossy decoding
        assert base64.b64decode(blob.blob) == NOT_UTF8
        (vault / "latin1.md").write_bytes(b"changed on disk\n")  # read fresh, not from the graph
        [again] = (await session.read_resource(uri("latin1.md"))).contents
        assert isinstance(again, TextResourceContents) and again.text == "changed on disk\n"


async def test_the_brief_is_a_resource(vault: Path, db_path: Path, tmp_path: Path) -> None:
    (vault / "Engrama.md").write_text(
        "---\ntype: Project\nstatus: active\n---\nMemory in a vault.\n", "utf-8"
    )
    async with served(vault, db_path, tmp_path) as session:
        await session.call_tool("engrama_sync_vault", {})
        [brief] = (await session.read_resource("engrama://brief")).contents
        assert isinstance(brief, TextResourceContents) and brief.mime_type == "text/markdown"
        assert "[[Engrama]]" in brief.text
        [small] = (await session.read_resource("engrama://brief?budget_tokens=200")).contents
        assert isinstance(small, TextResourceContents) and "[[Engrama]]" in small.text
        # Review 21d: 1 and -5 gave an empty brief, 0 the default, "abc" Python's own words.
        for wrong in ("1", "-5", "0", "abc", "999999999"):
            with pytest.raises(MCPError, match="budget_tokens must be a whole number from 200 to 20000"):
                await session.read_resource(f"engrama://brief?budget_tokens={wrong}")


async def test_paths_leading_out_of_the_vault_or_into_ignored_folders_are_refused(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("outside the vault\n", encoding="utf-8")
    (vault / "escape.md").symlink_to(secret)
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "app.md").write_text("settings\n", encoding="utf-8")
    (vault / ".trash").mkdir()
    (vault / ".trash" / "Old.md").write_text("deleted\n", encoding="utf-8")
    refusals = {
        "engrama://note/../secret.md": "climbs out",
        "engrama://note/%2E%2E/secret.md": "climbs out",
        "engrama://note/" + quote(str(secret), safe=""): "absolute",
        "engrama://note/escape.md": "symlink",
        "engrama://note/.obsidian/app.md": "not a note",
        "engrama://note/.trash/Old.md": "trash",
        "engrama://note/missing.md": "no note at",
    }
    async with served(vault, db_path, tmp_path) as session:
        for bad, reason in refusals.items():
            with pytest.raises(MCPError, match=reason):
                await session.read_resource(bad)


async def test_list_changed_is_sent_when_a_note_is_created_not_when_one_is_edited(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    (vault / "First.md").write_text("The first note.\n", encoding="utf-8")
    seen: list[str] = []
    async with served(vault, db_path, tmp_path, watch=True, seen=seen) as session:
        init_caps = session.server_capabilities
        assert init_caps is not None and init_caps.resources is not None and init_caps.resources.list_changed
        await _until(lambda: (vault / "First.md").read_text("utf-8").startswith("---\nengrama_id:"))
        seen.clear()
        (vault / "Second.md").write_text("A second note.\n", encoding="utf-8")
        await _until(lambda: "notifications/resources/list_changed" in seen)
        listed = {r.uri for r in (await session.list_resources()).resources}
        assert uri("Second.md") in listed
        await _until(lambda: (vault / "Second.md").read_text("utf-8").startswith("---\nengrama_id:"))
        seen.clear()
        with open(vault / "First.md", "a", encoding="utf-8") as note:
            note.write("An edit, not a new note.\n")
        (vault / "Third.md").write_text("A third note.\n", encoding="utf-8")  # marks when the edit is done
        await _until(lambda: "notifications/resources/list_changed" in seen)
        assert seen.count("notifications/resources/list_changed") == 1


async def _until(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await anyio.sleep(0.05)
