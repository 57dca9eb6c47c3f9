"""The tool listing as clients receive it: lean, because every conversation pays for it in context.

The SDK derives each tool's schemas from its pydantic models. Two things make that listing twice as large as it
needs to be, and this middleware rewrites the `tools/list` answer to remove them:

- a docstring's indentation: the SDK publishes `fn.__doc__` as written, eight spaces after every line break;
  the description is re-flowed into plain paragraphs, every word kept.
- pydantic's annotations that no client or model uses: a `title` on every property ("Query" for `query`),
  `"default": null`, and `anyOf: [{type: T}, {type: null}]` where `type: [T, "null"]` says the same. Removing
  them changes nothing a validator accepts or rejects.
- output schemas spelled out to the last nested field, with descriptions: more than half of the listing. A
  client needs an output schema to know that a tool answers with structured content and to check its shape; a
  model reads the result itself, whose keys name what they hold. So the listing publishes each result's top
  level (its keys and their JSON types). What a model must know to act on a result
  is said in the tool's description instead. The tools still validate their results against the full models.

Input schemas keep every description, default, bound and enum: they are what the model reads to call a tool.
"""

from __future__ import annotations

import re
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

_NULL = {"type": "null"}
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


class LeanToolListing:
    """Server middleware: rewrites the answer to `tools/list`; every other message passes untouched."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        answer = await call_next(ctx)
        if ctx.method != "tools/list" or not isinstance(answer, dict):
            return answer
        for tool in answer.get("tools", []):
            if isinstance(tool.get("description"), str):
                tool["description"] = reflow(tool["description"])
            if isinstance(tool.get("inputSchema"), dict):
                tool["inputSchema"] = lean_schema(tool["inputSchema"])
            if isinstance(tool.get("outputSchema"), dict):
                tool["outputSchema"] = top_level(tool["outputSchema"])
        return answer


def reflow(text: str) -> str:
    """`text` with each paragraph on one line and single spaces between words (blank lines separate paragraphs)."""
    return "\n".join(" ".join(p.split()) for p in _PARAGRAPH_BREAK.split(text.strip()) if p.strip())


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without the annotations that change no validation: titles, null defaults, nullable anyOf."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            out[key] = {name: lean_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = lean_schema(value)
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [lean_schema(sub) if isinstance(sub, dict) else sub for sub in value]
        else:
            out[key] = value
    return _collapse_nullable(out)


def _collapse_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [{type: T, ...}, {type: null}]` -> `type: [T, "null"], ...` (an enum gains null, as it must)."""
    options = schema.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and _NULL in options):
        return schema
    [other] = [option for option in options if option != _NULL]
    if not isinstance(other.get("type"), str) or any(key in schema for key in other):
        return schema
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    merged.update(other)
    merged["type"] = [other["type"], "null"]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return merged


def top_level(schema: dict[str, Any]) -> dict[str, Any]:
    """The top level of an output schema: each key with its JSON type(s).

    `required` is left out too: a client reading the result sees which keys are there, and the model never
    reads it; the tools' models (and the SDK's check of every result against them) keep the full contract."""
    properties = schema.get("properties", {})
    out: dict[str, Any] = {
        "type": "object",
        "properties": {name: _json_type(sub, schema.get("$defs", {})) for name, sub in properties.items()},
    }
    return out


def _json_type(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    kinds = _kinds(schema, defs)
    if not kinds:
        return {}  # any JSON value
    return {"type": kinds[0] if len(kinds) == 1 else kinds}


def _kinds(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    if "$ref" in schema:
        target = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
        return _kinds(target, defs) or ["object"]
    if "anyOf" in schema:
        kinds: list[str] = []
        for option in schema["anyOf"]:
            for kind in _kinds(option, defs):
                if kind not in kinds:
                    kinds.append(kind)
        return kinds
    kind = schema.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    return [kind] if isinstance(kind, str) else []
