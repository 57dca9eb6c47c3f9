"""What every tool module shares: reaching the runtime, turning domain errors into ToolError, hints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from server.runtime import NoVaultConfigured, Runtime
from vault_sync.errors import VaultError


@dataclass(frozen=True)
class AppContext:
    """What the server's lifespan hands to every tool call."""

    rt: Runtime


def runtime(ctx: Context) -> Runtime:
    """The runtime opened by the lifespan, for this request."""
    return cast(AppContext, ctx.request_context.lifespan_context).rt


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn the anticipated failures of a service into ToolError, whose message the model sees.

    Any other exception is a bug: the SDK reports it as "Error executing tool" and logs the traceback."""
    try:
        yield
    except ToolError:
        raise
    except (ValueError, VaultError, NoVaultConfigured) as exc:  # ValueError: ServiceError, ProfileError...
        raise ToolError(str(exc)) from exc
    except FileNotFoundError as exc:
        raise ToolError(
            f"{exc.filename or 'the file'} does not exist; check the vault-relative path"
        ) from exc
    except OSError as exc:  # disk full, permissions: the person must fix it, so say what it was
        raise ToolError(f"the vault or database could not be written: {exc.strerror or exc}") from exc


def structured(data: dict[str, Any]) -> CallToolResult:
    """A result whose structured content is `data` as given, for outputs whose absent keys mean "off"."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, indent=2))], structured_content=data
    )


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
