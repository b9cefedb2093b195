"""Pieces: workflows of movements, defined in YAML, and the transition rules.

A movement is one agent loop with its own instruction and tools, ended by the
`transition` tool. Next steps are another movement or one of the special steps:
COMPLETE (the job succeeded), ASK (wait for a human), ABORT, WAIT_SUBTASKS (wait
for the child jobs this movement spawned). ASK and ABORT are open to every
movement unless the piece says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

COMPLETE, ASK, ABORT, WAIT_SUBTASKS = "COMPLETE", "ASK", "ABORT", "WAIT_SUBTASKS"
SPECIAL_STEPS = frozenset({COMPLETE, ASK, ABORT, WAIT_SUBTASKS})
CHAT_PIECE = "chat"


class Movement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")
    instruction: str = Field(min_length=1)
    allowed_tools: list[str] = Field(default_factory=list)
    transitions: list[str] = Field(
        default_factory=list,
        description="Next steps this movement may take besides ASK and ABORT.",
    )
    default_next: str | None = Field(
        default=None, description="Where a forced transition goes (context exhausted)."
    )
    max_iterations: int = Field(default=30, ge=1, le=1000)
    fresh_segment: bool = Field(
        default=True, description="Start from a clean context, or continue the session's."
    )
    ends_on: Literal["transition", "end_turn"] = Field(
        default="transition",
        description="`end_turn`: the movement ends when the model stops (the chat piece).",
    )


class Piece(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = ""
    initial_movement: str | None = None
    allow_ask: bool = True
    allow_abort: bool = True
    movements: list[Movement] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Piece:
        names = [m.name for m in self.movements]
        if len(set(names)) != len(names):
            raise ValueError("movement names must be unique")
        known = set(names) | SPECIAL_STEPS
        if self.initial_movement is not None and self.initial_movement not in names:
            raise ValueError(f"initial_movement {self.initial_movement!r} is not a movement")
        for movement in self.movements:
            for step in [*movement.transitions, movement.default_next]:
                if step is not None and step not in known:
                    raise ValueError(f"movement {movement.name!r}: unknown next step {step!r}")
        return self

    @property
    def first(self) -> Movement:
        return self.movement(self.initial_movement or self.movements[0].name)

    def movement(self, name: str) -> Movement:
        for movement in self.movements:
            if movement.name == name:
                return movement
        raise KeyError(name)

    def next_steps(self, movement: Movement) -> list[str]:
        """Every next step `movement` may take, in a stable order."""
        steps = list(movement.transitions)
        if self.allow_ask and ASK not in steps:
            steps.append(ASK)
        if self.allow_abort and ABORT not in steps:
            steps.append(ABORT)
        return steps

    def check_step(self, movement: Movement, step: str) -> None:
        """Raise ValueError, in words the model can act on, if `step` is not open here."""
        allowed = self.next_steps(movement)
        if step not in allowed:
            raise ValueError(
                f"next_step {step!r} is not open from {movement.name!r}; choose one of {allowed}"
            )

    def forced_step(self, movement: Movement) -> str:
        """Where a forced transition goes: the default next step, else ABORT."""
        return movement.default_next or ABORT


@dataclass(frozen=True)
class PieceProblem:
    path: str
    reason: str


@dataclass
class PieceCatalog:
    pieces: dict[str, Piece]
    problems: list[PieceProblem]

    def get(self, name: str) -> Piece | None:
        return self.pieces.get(name)


BUILTIN_DIR = Path(__file__).resolve().parent.parent / "pieces"


def load_piece(path: Path) -> Piece:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("the file is not a YAML mapping")
    return Piece.model_validate(data)


def load_catalog(folders: Iterable[Path]) -> PieceCatalog:
    """Load every `*.yaml` of the folders in order; a later folder overrides a name.

    A broken file is reported (path and reason) and skipped, never fatal.
    """
    catalog = PieceCatalog(pieces={}, problems=[])
    for folder in folders:
        if not folder.is_dir():
            if folder != BUILTIN_DIR:
                catalog.problems.append(PieceProblem(str(folder), "not a folder"))
            continue
        for path in sorted(folder.glob("*.y*ml")):
            try:
                piece = load_piece(path)
            except (OSError, yaml.YAMLError, ValueError, ValidationError) as exc:
                catalog.problems.append(PieceProblem(str(path), _reason(exc)))
                continue
            catalog.pieces[piece.name] = piece
    return catalog


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'piece'}: {err['msg']}"
            for err in exc.errors()
        )
    return f"{type(exc).__name__}: {exc}".splitlines()[0]
