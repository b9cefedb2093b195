"""Pieces: each one's movements and transitions as a graph, its YAML, and the piece files
that failed to load with why."""

from __future__ import annotations

from typing import Any

import yaml
from fastapi import APIRouter, Request
from fastapi.responses import Response
from markupsafe import Markup

from app.console.graph import graph_of, svg
from app.console.live import q
from app.console.web import Api, Templates

router = APIRouter(prefix="/console/pieces")


def _yaml(piece: dict[str, Any]) -> str:
    """The piece as YAML, as it was loaded (defaults filled in): what a job will run."""
    return yaml.safe_dump(piece, sort_keys=False, allow_unicode=True, width=88)


@router.get("")
async def pieces(request: Request, api: Api, templates: Templates) -> Response:
    listed = await api.get("/pieces")
    shown = []
    for summary in listed["data"]:
        piece = await api.get(f"/pieces/{q(summary['name'])}")
        graph = graph_of(piece)
        shown.append(
            {
                "piece": piece,
                "graph": graph,
                # svg() escapes every name it writes
                "svg": Markup(svg(graph, f"Movements of the piece {piece['name']}")),
                "yaml": _yaml(piece),
            }
        )
    return templates.page(request, "pieces.html", pieces=shown, problems=listed["problems"])
