"""A piece's movements and transitions as a small SVG graph.

Pure: a piece as the API shows it (`GET /pieces/{name}`) in, SVG text out. Movements
stand in one column in the piece's order (the first one marked); the steps that end or
park a job (COMPLETE, ASK, ABORT, WAIT_SUBTASKS) stand in a column to the right. An edge
to a later movement bends left, one back to an earlier movement bends right of the
column's left edge further out; a forced move (`default_next`) is dashed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

SPECIAL = ("COMPLETE", "ASK", "WAIT_SUBTASKS", "ABORT")
NODE_W, NODE_H, ROW = 150, 34, 64
LEFT, GAP = 140, 170  # the movements' column starts here; the specials' one GAP further


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    forced: bool  # the movement's default_next, where a forced transition goes


@dataclass(frozen=True)
class Graph:
    movements: list[str]
    first: str
    specials: list[str]
    edges: list[Edge]


def graph_of(piece: Mapping[str, Any]) -> Graph:
    movements = [str(m["name"]) for m in piece.get("movements", [])]
    first = str(piece.get("initial_movement") or (movements[0] if movements else ""))
    edges: list[Edge] = []
    for movement in piece.get("movements", []):
        name = str(movement["name"])
        targets = [str(t) for t in movement.get("transitions", [])]
        if piece.get("allow_ask", True):
            targets.append("ASK")
        if piece.get("allow_abort", True):
            targets.append("ABORT")
        default = movement.get("default_next")
        for target in dict.fromkeys(targets):
            edges.append(Edge(name, target, forced=target == default))
        if default is not None and default not in targets:
            edges.append(Edge(name, str(default), forced=True))
    used = {e.target for e in edges}
    return Graph(movements, first, [s for s in SPECIAL if s in used], edges)


def _center(graph: Graph, name: str) -> tuple[float, float]:
    if name in graph.movements:
        return LEFT + NODE_W / 2, 20 + graph.movements.index(name) * ROW + NODE_H / 2
    rows = max(len(graph.movements), len(graph.specials))
    spacing = ROW * rows / max(len(graph.specials), 1)
    index = graph.specials.index(name)
    return LEFT + GAP + NODE_W, 20 + index * spacing + NODE_H / 2


def _path(graph: Graph, edge: Edge) -> str:
    x1, y1 = _center(graph, edge.source)
    x2, y2 = _center(graph, edge.target)
    if edge.target in graph.specials:  # right edge of the movement to the special's left
        return f"M{x1 + NODE_W / 2:.0f},{y1:.0f} L{x2 - NODE_W / 2 - 4:.0f},{y2:.0f}"
    if edge.source == edge.target:
        return (
            f"M{x1 - NODE_W / 2:.0f},{y1 - 6:.0f} C{x1 - NODE_W / 2 - 40:.0f},{y1 - 30:.0f} "
            f"{x1 - NODE_W / 2 - 40:.0f},{y1 + 30:.0f} {x1 - NODE_W / 2 - 4:.0f},{y1 + 6:.0f}"
        )
    distance = abs(graph.movements.index(edge.target) - graph.movements.index(edge.source))
    bend = min(24 + 22 * distance, LEFT - 12)  # stays inside the picture
    left = x1 - NODE_W / 2
    return (
        f"M{left:.0f},{y1:.0f} C{left - bend:.0f},{y1:.0f} {left - bend:.0f},{y2:.0f} "
        f"{left - 4:.0f},{y2:.0f}"
    )


def _node(graph: Graph, name: str, css: str) -> str:
    x, y = _center(graph, name)
    label = escape(name)
    return (
        f'<g class="node {css}"><title>{label}</title>'
        f'<rect x="{x - NODE_W / 2:.0f}" y="{y - NODE_H / 2:.0f}" width="{NODE_W}" '
        f'height="{NODE_H}" rx="6"/>'
        f'<text x="{x:.0f}" y="{y + 5:.0f}" text-anchor="middle">{label}</text></g>'
    )


def svg(graph: Graph, title: str) -> str:
    rows = max(len(graph.movements), len(graph.specials), 1)
    height = 40 + rows * ROW
    width = LEFT + GAP + NODE_W * 2 + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="piece-graph" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(title)}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/>'
        "</marker></defs>",
    ]
    for edge in graph.edges:
        css = "edge forced" if edge.forced else "edge"
        label = escape(f"{edge.source} → {edge.target}" + (" (forced)" if edge.forced else ""))
        parts.append(
            f'<path class="{css}" d="{_path(graph, edge)}" marker-end="url(#arrow)">'
            f"<title>{label}</title></path>"
        )
    for name in graph.movements:
        parts.append(_node(graph, name, "movement first" if name == graph.first else "movement"))
    for name in graph.specials:
        parts.append(_node(graph, name, f"special {name.lower()}"))
    parts.append("</svg>")
    return "".join(parts)
