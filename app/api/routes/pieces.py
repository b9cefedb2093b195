from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.api.deps import CurrentTenant, RuntimeDep
from app.api.errors import problem_responses
from app.api.schemas.pieces import Piece, PieceList, PieceProblemPublic, PieceSummary
from app.domain.errors import NotFound

router = APIRouter(prefix="/pieces", tags=["pieces"], responses=problem_responses(401, 503))


@router.get(
    "",
    name="list",
    summary="The pieces jobs can run, and the piece files that failed to load",
    description="A piece file is checked whole at start-up: YAML syntax (with line and "
    "column), fields, next steps that name no movement, movements no transition reaches, "
    "tools this server does not have, and names reserved for internal job kinds (`chat`, "
    "`compaction`, `summary`, `piece`, `compact`, `summarize`). A file that fails is listed "
    "under `problems` and not loaded.",
)
async def list_pieces(runtime: RuntimeDep, tenant: CurrentTenant) -> PieceList:
    catalog = runtime.pieces
    return PieceList(
        data=[
            PieceSummary(
                name=p.name, description=p.description, movements=[m.name for m in p.movements]
            )
            for p in sorted(catalog.pieces.values(), key=lambda p: p.name)
        ],
        problems=[PieceProblemPublic.of(p) for p in catalog.problems],
    )


@router.get(
    "/{name}",
    name="get",
    summary="One piece in full",
    description=(
        "The piece as loaded from its file: its movements with their "
        "instructions, allowed tools and transitions. A name no loaded piece has "
        "is a 404."
    ),
    responses=problem_responses(404),
)
async def get_piece(
    name: Annotated[str, Path(max_length=100)], runtime: RuntimeDep, tenant: CurrentTenant
) -> Piece:
    piece = runtime.pieces.get(name)
    if piece is None:
        raise NotFound(f"piece {name!r} does not exist", resource="piece")
    return piece
