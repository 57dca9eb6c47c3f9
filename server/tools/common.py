"""What every tool module shares: reaching the runtime, turning domain errors into ToolError, compact results,
hints.

Results are compact JSON: the structured content, and the same JSON as one text block beside it, without
indentation. The MCP spec asks a tool with structured output to also return it serialised in a text block, for
clients that read only text (several desktop clients show the model the text blocks alone), so the text stays;
what goes is the SDK's `indent=2` pretty-printing, about a fifth of every result's bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from server.runtime import NoVaultConfigured, Runtime
from server.store.database import DatabaseError, DatabaseProblem, DatabaseTrouble, explain_database_error
from vault_sync.errors import NoteInConflict, VaultError


@dataclass(frozen=True)
class AppContext:
    """What the server's lifespan hands to every tool call."""

    rt: Runtime


def runtime(ctx: Context) -> Runtime:
    """The runtime opened by the lifespan, for this request."""
    return cast(AppContext, ctx.request_context.lifespan_context).rt


_STAYS = (
    "A change the tool already made to a note stays in the vault; the graph takes it up once the database works "
    "again"
)
# A write the database refused may have been all the tool did (a second client only queues its writes in the
# database): it cannot be said that something was kept (review 21e: a follower's remember was lost so).
_MAYBE_SAVED = (
    "What the tool had already written into a note stays there, and the graph takes it up once the database "
    "works again; anything else was not saved: call the tool again then"
)


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn the anticipated failures of a service into ToolError, whose message the model sees.

    Any other exception is a bug: the SDK reports it as "Error executing tool" and logs the traceback."""
    try:
        yield
    except ToolError:
        raise
    except DatabaseTrouble as exc:  # its disk is full, ...: explained already
        raise ToolError(f"{exc}. {_MAYBE_SAVED}") from exc
    except NoteInConflict as exc:  # a call made here is not kept for later (review 23f: it said it would be)
        raise ToolError(f"{exc}; then make this call again: it is not kept to be written later") from exc
    # ValueError: ServiceError, ProfileError...; DatabaseProblem: the database file was deleted or replaced.
    except (ValueError, VaultError, NoVaultConfigured, DatabaseProblem) as exc:
        raise ToolError(str(exc)) from exc
    except DatabaseError as exc:  # locked by another program, disk full, damaged: say what to do
        raise ToolError(f"{explain_database_error(exc)}. {_STAYS}") from exc
    except FileNotFoundError as exc:
        raise ToolError(
            f"{exc.filename or 'the file'} does not exist; check the vault-relative path"
        ) from exc
    except OSError as exc:  # disk full, permissions: the person must fix it, so say what it was
        raise ToolError(f"the vault or database could not be written: {exc.strerror or exc}") from exc


def structured(data: dict[str, Any]) -> CallToolResult:
    """A result whose structured content is `data` as given (absent keys mean "off"), and the same compact JSON
    as its text block."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def result(model: BaseModel) -> CallToolResult:
    """The tool result for an output model: every field, as compact JSON (see `structured`)."""
    return structured(model.model_dump(mode="json"))


def omit_none(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without its top-level None values (optional parts of a result that do not apply)."""
    return {key: value for key, value in data.items() if value is not None}


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Writes into the vault and graph: additive (nothing is deleted or overwritten), and repeating the same call
# leaves the same state, except that remember appends a dated observation (once per day, see notes.py).
WRITES_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
