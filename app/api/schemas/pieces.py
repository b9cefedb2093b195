from __future__ import annotations

from pydantic import BaseModel

from app.engine.pieces import Movement, Piece


class PieceSummary(BaseModel):
    name: str
    description: str
    movements: list[str]


class PieceProblemPublic(BaseModel):
    path: str
    reason: str


class PieceList(BaseModel):
    data: list[PieceSummary]
    problems: list[PieceProblemPublic]


__all__ = ["Movement", "Piece", "PieceList", "PieceProblemPublic", "PieceSummary"]
