"""An MCP server's tool as a registry tool (`app.engine.tools.Tool`), and its answer as text.

Its input schema is the server's; its result goes through the registry like any tool's,
so it shares the response's result budget and is cut with a `read_on` hint. Text content
becomes the result's text; `structuredContent` is sent as compact JSON when no text says
it; an image is stored as a file of the tenant (`ToolContext.images`, the checks of
`POST /files`) and sent as an image block inside the tool_result, or named in a note
when it cannot be (not an image, too large, refused by the Messages API); audio and
other binary content are named, not sent; `isError` is `is_error`. A
server that cannot answer (unreachable, timed out, crashed, a protocol error) gives an
`is_error` result saying so, never a failed turn, and its state goes to the job's
`mcp.server_status` event.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from app.domain.items import ImageBlock
from app.domain.tool_policy import mcp_default
from app.engine.tools import ImageGateway, Tool, ToolContext, ToolOutput
from app.mcp.catalog import OfferedTool
from app.mcp.errors import McpFailure
from app.mcp.pool import McpPool, ServerSource

READ_ON = "Call the tool again asking for less (a narrower query, a page, a range)."
INTERRUPTED = "the call was interrupted; its effect is unknown"
"""The result of a call a stopped worker left unanswered, unless it may run again (a
trusted server's tool declaring readOnlyHint or idempotentHint)."""


class McpArgs(BaseModel):
    """Any object: the server checks its own input schema."""

    model_config = ConfigDict(extra="allow")


def render(result: Any, notes: dict[int, str] | None = None) -> str:
    """A `CallToolResult` as the text the model reads; `notes`: what stands in the text
    for the content blocks at those indexes (images sent as image blocks say nothing)."""
    parts: list[str] = []
    for index, block in enumerate(result.content or ()):
        kind = getattr(block, "type", "")
        if notes is not None and index in notes:
            if notes[index]:
                parts.append(notes[index])
        elif kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{block.mime_type} {kind}, {len(block.data)} base64 characters]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)
    return "\n".join(parts) if parts else "(no content)"


async def _images(
    result: Any, gateway: ImageGateway, tool: str
) -> tuple[dict[int, str], tuple[ImageBlock, ...]]:
    """The result's images stored as files: a note for each that is not sent, and the
    image blocks of those that are."""
    notes: dict[int, str] = {}
    images: list[ImageBlock] = []
    for index, block in enumerate(result.content or ()):
        if getattr(block, "type", "") != "image":
            continue
        filename = f"{tool}-{index + 1}.{block.mime_type.rsplit('/', 1)[-1] or 'image'}"
        try:
            data = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError):
            notes[index] = f"[image {filename} not sent: its data is not base64]"
            continue
        stored = await gateway.store(data, filename)
        if isinstance(stored, str):
            notes[index] = stored
        else:
            notes[index] = ""
            images.append(stored)
    return notes, tuple(images)


def mcp_tool(offered: OfferedTool, source: ServerSource, pool: McpPool) -> Tool[McpArgs]:
    server_tool = offered.tool.name

    async def invoke(ctx: ToolContext, args: McpArgs) -> ToolOutput:
        arguments = dict(args.model_extra or {})
        try:
            connection = await pool.connection(source)
            result = await connection.call_tool(server_tool, arguments)
        except McpFailure as exc:
            pool.status(source.name, exc.kind, exc.detail)
            return ToolOutput(
                f"the MCP server {source.name!r} could not run {server_tool!r} "
                f"({exc.kind}): {exc.detail}",
                is_error=True,
            )
        pool.status(source.name, "ok")
        if ctx.images is None:
            return ToolOutput(render(result), is_error=bool(result.is_error))
        notes, images = await _images(result, ctx.images, offered.name)
        text = render(result, notes)
        if images and text == "(no content)":
            text = ""
        return ToolOutput(text, is_error=bool(result.is_error), images=images)

    description = offered.tool.description or f"{server_tool} (MCP server {source.name})"
    info = offered.tool
    return Tool(
        name=offered.name,
        description=description,
        input_model=McpArgs,
        invoke=invoke,
        read_on=READ_ON,
        input_schema=offered.tool.input_schema,
        policy_default=mcp_default(trusted=source.trusted, read_only=info.read_only),
        rerun_on_resume=source.trusted and (info.read_only or info.idempotent),
        interrupted=INTERRUPTED,
    )
