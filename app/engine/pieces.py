"""Pieces: workflows of movements, defined in YAML, and the transition rules.

A movement is one agent loop with its own instruction and tools, ended by the
`transition` tool. Next steps are another movement or one of the special steps:
COMPLETE (the job succeeded), ASK (wait for a human), ABORT, WAIT_SUBTASKS (wait
for the child jobs this movement spawned). ASK and ABORT are open to every
movement unless the piece says otherwise.

A piece file is checked whole when it is loaded, so a mistake shows in `GET /pieces`
instead of in a job that runs wrong: unknown tools, next steps that name nothing,
movements no path reaches, YAML syntax errors, names that belong to Strata's internal
job kinds, and two files of one folder defining the same piece. Each problem says the
line and column it is about (the syntax error, or the key or value at fault) and names
the file by its name and folder kind, never by a server path.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from app.domain.jobs import ABORT, ASK, COMPLETE, RESERVED_PIECE_NAMES, SPECIAL_STEPS, WAIT_SUBTASKS
from app.domain.tool_policy import ToolPolicyRule, ToolRule, unoffered
from app.mcp.names import SERVER_NAME_PATTERN, is_mcp_name

__all__ = [
    "ABORT",
    "ASK",
    "BUILTIN_DIR",
    "COMPLETE",
    "SPECIAL_STEPS",
    "WAIT_SUBTASKS",
    "Movement",
    "Piece",
    "PieceCatalog",
    "PieceProblem",
    "load_catalog",
    "load_piece",
]


class _At(ValueError):
    """A rule a piece breaks, with the path (keys and indexes) of the part at fault."""

    def __init__(self, reason: str, *path: str | int) -> None:
        super().__init__(reason)
        self.path = path


class MovementMcp(BaseModel):
    """An MCP server a movement attaches: the tenant's or the operator's, by name."""

    model_config = ConfigDict(extra="forbid")

    server: str = Field(pattern=SERVER_NAME_PATTERN)
    tools: list[str] | None = Field(
        default=None, description="Shell globs over the server's own tool names; null: all."
    )


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
        default=None,
        description="Where a forced transition goes (context exhausted, or the model never "
        "called transition). A forced move into COMPLETE fails the job as not completed.",
    )
    max_iterations: int = Field(default=30, ge=1, le=1000)
    fresh_segment: bool = Field(
        default=True,
        description="Start from a clean context, or continue the job's previous movement's "
        "conversation. Never the chat's: a job works in segments of its own.",
    )
    verify: bool = Field(
        default=False,
        description="A checking movement: when the workspace is a git repository, the next "
        "movement gets a `git status` / diff excerpt of what changed.",
    )
    tool_policy: list[ToolPolicyRule] = Field(
        default_factory=list,
        description="This movement's tool policy rules: the lowest layer, under the "
        "operator's, the tenant's and the session's (see Tool policies).",
    )
    mcp: list[MovementMcp] = Field(
        default_factory=list,
        description="MCP servers this movement offers the tools of (within each one's "
        "`tools` globs), besides the session's that `allowed_tools` names by glob.",
    )
    _rules: tuple[ToolRule, ...] | None = PrivateAttr(default=None)

    def mcp_attachments(self) -> list[dict[str, Any]]:
        """`mcp` as a session or job stores its attachments."""
        return [{"server": a.server, "tools": a.tools} for a in self.mcp]

    def policy_rules(self) -> tuple[ToolRule, ...]:
        """`tool_policy` compiled, once per loaded piece."""
        if self._rules is None:
            self._rules = tuple(rule.compiled() for rule in self.tool_policy)
        return self._rules


class Piece(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = ""
    system: str | None = Field(
        default=None,
        description="The system prompt of every movement; else the session's, else Strata's.",
    )
    initial_movement: str | None = None
    allow_ask: bool = True
    allow_abort: bool = True
    max_movements: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Movements a job may run before it is aborted, those of its subtasks "
        "(at every depth) included; default STRATA_JOB_MAX_MOVEMENTS.",
    )
    movements: list[Movement] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Piece:
        if self.name in RESERVED_PIECE_NAMES:
            raise _At(
                f"{self.name!r} is the name of an internal job kind; "
                f"no piece may be called one of {sorted(RESERVED_PIECE_NAMES)}",
                "name",
            )
        names = [m.name for m in self.movements]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise _At("movement names must be unique", "movements", index, "name")
        known = set(names) | SPECIAL_STEPS
        if self.initial_movement is not None and self.initial_movement not in names:
            raise _At(
                f"initial_movement {self.initial_movement!r} is not a movement", "initial_movement"
            )
        for index, movement in enumerate(self.movements):
            unknown = f"movement {movement.name!r}: unknown next step"
            for position, step in enumerate(movement.transitions):
                if step not in known:
                    raise _At(f"{unknown} {step!r}", "movements", index, "transitions", position)
            if movement.default_next is not None and movement.default_next not in known:
                raise _At(
                    f"{unknown} {movement.default_next!r}", "movements", index, "default_next"
                )
        if unreachable := self.unreachable():
            raise _At(
                f"movements no transition reaches from {self.first.name!r}: {unreachable}",
                "movements",
                names.index(unreachable[0]),
            )
        return self

    @property
    def first(self) -> Movement:
        return self.movement(self.initial_movement or self.movements[0].name)

    def movement(self, name: str) -> Movement:
        for movement in self.movements:
            if movement.name == name:
                return movement
        raise KeyError(name)

    def unreachable(self) -> list[str]:
        """Movements no chain of transitions (or forced moves) leads to from the first."""
        seen = {self.first.name}
        todo = [self.first]
        while todo:
            movement = todo.pop()
            for step in [*movement.transitions, movement.default_next]:
                if step is not None and step not in SPECIAL_STEPS and step not in seen:
                    seen.add(step)
                    todo.append(self.movement(step))
        return [m.name for m in self.movements if m.name not in seen]

    def unknown_tools(self, known: Collection[str]) -> list[str]:
        """`movement: tool` for each allowed tool this server has no tool of that name for."""
        return [
            f"{movement.name}: {tool}"
            for movement in self.movements
            for tool in movement.allowed_tools
            if tool not in known and not is_mcp_name(tool)
        ]

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

    def sends_back(self, movement: Movement, step: str) -> bool:
        """Whether `movement → step` goes back (to itself or an earlier movement): what a
        check sends back is feedback for that movement; a step forward carries none."""
        if step in SPECIAL_STEPS:
            return False
        names = [m.name for m in self.movements]
        return names.index(step) <= names.index(movement.name)


FolderKind = Literal["builtin", "pieces_dir"]


@dataclass(frozen=True)
class PieceProblem:
    """A piece file that was not loaded: its file name, which folder, where and why."""

    file: str
    folder: FolderKind
    reason: str
    line: int | None = None
    column: int | None = None
    name: str | None = None


@dataclass
class PieceCatalog:
    pieces: dict[str, Piece]
    problems: list[PieceProblem]

    def get(self, name: str) -> Piece | None:
        return self.pieces.get(name)


BUILTIN_DIR = Path(__file__).resolve().parent.parent / "pieces"


class PieceFileError(ValueError):
    """A piece file that cannot be a piece, with where in the file when that is known."""

    def __init__(self, reason: str, *, line: int | None = None, column: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.column = column


def load_piece(
    path: Path, known_tools: Collection[str] | None = None, max_policy_rules: int | None = None
) -> Piece:
    """The piece of one file; PieceFileError says why it is none, and where. A movement's
    `tool_policy` holds at most `max_policy_rules` rules, each naming a known tool."""
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise PieceFileError(
            f"YAML syntax error: {exc.problem or exc.context}", line=where[0], column=where[1]
        ) from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise PieceFileError(f"not readable YAML: {exc}".splitlines()[0]) from exc
    if not isinstance(data, dict):
        raise PieceFileError("the file is not a YAML mapping")
    try:
        piece = Piece.model_validate(data)
    except ValidationError as exc:
        line, column = _located(root, _error_path(exc.errors()[0]))
        raise PieceFileError(_reason(exc), line=line, column=column) from exc
    if known_tools is not None and (unknown := piece.unknown_tools(known_tools)):
        first = next(
            ("movements", index, "allowed_tools", position)
            for index, movement in enumerate(piece.movements)
            for position, tool in enumerate(movement.allowed_tools)
            if tool not in known_tools and not is_mcp_name(tool)
        )
        line, column = _located(root, first)
        raise PieceFileError(
            f"unknown tools: {', '.join(unknown)}; known: {', '.join(sorted(known_tools))}",
            line=line,
            column=column,
        )
    if problem := _policy_problem(piece, known_tools, max_policy_rules):
        line, column = _located(root, problem[1])
        raise PieceFileError(problem[0], line=line, column=column)
    return piece


def _policy_problem(
    piece: Piece, known_tools: Collection[str] | None, max_rules: int | None
) -> tuple[str, tuple[str | int, ...]] | None:
    """The first movement `tool_policy` that holds too many rules or a rule naming no
    tool of the server: why, and where."""
    for index, movement in enumerate(piece.movements):
        rules = movement.tool_policy
        at: tuple[str | int, ...] = ("movements", index, "tool_policy")
        if max_rules is not None and len(rules) > max_rules:
            reason = f"movement {movement.name!r}: tool_policy holds {len(rules)} rules"
            return f"{reason}; at most {max_rules} (STRATA_TOOL_POLICY_MAX_RULES)", at
        if known_tools is not None and (missing := unoffered(movement.policy_rules(), known_tools)):
            rule = rules[missing[0]]
            return (
                f"movement {movement.name!r}: tool_policy rule {missing[0]} names no tool "
                f"({rule.tool!r}); known: {', '.join(sorted(known_tools))}",
                (*at, missing[0], "tool"),
            )
    return None


def _error_path(error: Any) -> Sequence[str | int]:
    """Where in the file a validation error is: its own location, or for a rule of the
    whole piece the path the rule names."""
    cause = (error.get("ctx") or {}).get("error")
    return cause.path if isinstance(cause, _At) else tuple(error["loc"])


def _located(root: yaml.Node | None, path: Sequence[str | int]) -> tuple[int | None, int | None]:
    """The 1-based line and column of the part of the file at `path`: a mapping's entry
    by its key, a list's item by itself; a part that is missing (a required key) by the
    deepest part that is there."""
    node = root
    mark = None if root is None else root.start_mark
    for part in path:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    mark, child = key.start_mark, value
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if 0 <= part < len(node.value):
                child = node.value[part]
                mark = child.start_mark
        if child is None:
            break
        node = child
    return (None, None) if mark is None else (mark.line + 1, mark.column + 1)


def load_catalog(
    folders: Iterable[Path],
    known_tools: Collection[str] | None = None,
    max_policy_rules: int | None = None,
) -> PieceCatalog:
    """Load every `*.yaml` of the folders in order; a later folder overrides a name.

    The first folder is the builtin one (`BUILTIN_DIR`), any other the operator's. A
    broken file is reported and skipped, never fatal. Two files of one folder that
    define the same name are both reported and the name is not loaded at all: which
    one was meant cannot be told, and running either could be the wrong one.
    `known_tools`, when given, are the tool names a movement may allow and its
    `tool_policy` may name; `max_policy_rules` bounds that list.
    """
    catalog = PieceCatalog(pieces={}, problems=[])
    for folder in folders:
        kind: FolderKind = "builtin" if folder == BUILTIN_DIR else "pieces_dir"
        if not folder.is_dir():
            if kind != "builtin":
                catalog.problems.append(PieceProblem("", kind, "the pieces folder is missing"))
            continue
        files: dict[str, list[str]] = {}
        for path in sorted(folder.glob("*.y*ml")):
            try:
                piece = load_piece(path, known_tools, max_policy_rules)
            except PieceFileError as exc:
                catalog.problems.append(
                    PieceProblem(path.name, kind, exc.reason, exc.line, exc.column, _name_of(path))
                )
                continue
            except OSError as exc:
                catalog.problems.append(PieceProblem(path.name, kind, exc.strerror or "unreadable"))
                continue
            files.setdefault(piece.name, []).append(path.name)
            catalog.pieces[piece.name] = piece
        for name, defined_in in files.items():
            if len(defined_in) > 1:
                catalog.pieces.pop(name, None)
                catalog.problems.extend(_defined_twice(folder, kind, name, defined_in))
    return catalog


def _defined_twice(
    folder: Path, kind: FolderKind, name: str, files: list[str]
) -> list[PieceProblem]:
    """A problem for each file of one folder that defines `name`, at its `name:` line."""
    listed = f"{'both ' if len(files) == 2 else ''}{', '.join(files[:-1])} and {files[-1]}"
    reason = (
        f"piece {name!r} is defined by {listed}; a piece name belongs to one file, "
        "so none of them is loaded"
    )
    problems = []
    for file in files:
        try:
            root = yaml.compose((folder / file).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            root = None
        line, column = _located(root, ("name",))
        problems.append(PieceProblem(file, kind, reason, line, column, name))
    return problems


def _name_of(path: Path) -> str | None:
    """The `name:` a broken file meant to define, when it can be read at all."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def _reason(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'piece'}: {err['msg']}".replace(
            "piece: Value error, ", ""
        ).replace("Value error, ", "")
        for err in exc.errors()
    )
