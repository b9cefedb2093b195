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


class _BlockDumper(yaml.SafeDumper):
    """Multi-line texts (instructions, system prompts) as `|` blocks, as piece files have them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _text)


def _yaml(piece: dict[str, Any]) -> str:
    """The piece as YAML, as it was loaded (defaults filled in): what a job will run."""
    return yaml.dump(piece, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=88)


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
