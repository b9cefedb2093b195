"""The tools this server can offer an agent: what a session's `tools` may name."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import CurrentTenant, RuntimeDep
from app.api.errors import problem_responses
from app.api.schemas.tools import ToolList, ToolPublic

router = APIRouter(prefix="/tools", tags=["tools"], responses=problem_responses(401, 503))


@router.get(
    "",
    name="list",
    summary="The tools a session or a piece's movement may offer",
    description=(
        "Strata's own tools by name, each with its description and input schema; "
        "`in_chat` says whether a session's chat turns can use it (the others "
        "need a piece's movement). MCP tools are not listed here: a refresh of "
        "their server lists them."
    ),
)
async def list_tools(runtime: RuntimeDep, tenant: CurrentTenant) -> ToolList:
    specs = {tool.name: tool.spec() for tool in runtime.tools.tools}
    return ToolList(
        data=[
            ToolPublic(
                name=tool.name,
                description=tool.description,
                in_chat=tool.in_chat,
                input_schema=specs[tool.name].input_schema,
            )
            for tool in sorted(runtime.tools.tools, key=lambda t: t.name)
        ]
    )
