from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.engine.pieces import Movement, Piece, PieceProblem


class PieceSummary(BaseModel):
    name: str
    description: str
    movements: list[str]


class PieceProblemPublic(BaseModel):
    """A piece file that was not loaded. Named by its file name and folder, never by a
    server path."""

    file: str = Field(description="The file name; empty when the folder itself is missing.")
    folder: Literal["builtin", "pieces_dir"] = Field(
        description="`builtin`: Strata's own pieces; `pieces_dir`: STRATA_PIECES_DIR."
    )
    name: str | None = Field(description="The `name:` the file meant to define, if readable.")
    line: int | None = Field(
        description="1-based line of the problem: a YAML syntax error, or the key or value "
        "at fault (a missing key: the mapping that lacks it)."
    )
    column: int | None = Field(description="1-based column of the problem.")
    reason: str

    @classmethod
    def of(cls, problem: PieceProblem) -> PieceProblemPublic:
        return cls(
            file=problem.file,
            folder=problem.folder,
            name=problem.name,
            line=problem.line,
            column=problem.column,
            reason=problem.reason,
        )


class PieceList(BaseModel):
    data: list[PieceSummary]
    problems: list[PieceProblemPublic]


__all__ = ["Movement", "Piece", "PieceList", "PieceProblemPublic", "PieceSummary"]
