"""What a tool policy costs the runner: `Policy.decide` per tool call, `effective_policy`
per turn.

The runner builds one `Policy` at a turn's (or movement's) start from the four layers'
stored rules and asks it once per tool call, in memory. Measured here on rule lists of
two sizes: a plausible one (operator 4, tenant 12, session 8, movement 4 rules, globs on
the tool and on `command` / `path`) and every layer full (`STRATA_TOOL_POLICY_MAX_RULES`
rules each); the calls are a `Bash` command of 300 characters that a rule on its input
decides, a `Read` decided by a tool-level rule, and a tool no rule names (its default).
The per-call figure is the best of several rounds of many calls (`timeit`), as CPU time
of this process; the turn figure includes compiling every rule from its stored JSON.

Run: `.venv/bin/python -m bench.tool_policy`.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from typing import Any

from app.domain.tool_policy import BUILTIN_DEFAULT, Effect, Layer, decide, rules_of
from app.services.tool_policy import effective_policy
from app.settings import Settings

BUILTIN = ("Bash", "Read", "Write", "Edit", "Glob", "Grep", "TaskCreate", "TaskList", "Detail")
COMMAND = "git log --oneline --decorate -n 50 -- app/ tests/ " + "x" * 250
ROUNDS = 7


def _layer(size: int, salt: str) -> list[dict[str, Any]]:
    """`size` stored rules in the shapes people write: tool-level rules, and globs on a
    Bash command or a file path, mostly not matching the measured calls."""
    shapes: list[dict[str, Any]] = [
        {"tool": "Bash", "input": {"command": f"{salt}-deploy *"}, "effect": "deny"},
        {"tool": "Write", "input": {"path": f"{salt}/secrets/*"}, "effect": "ask"},
        {"tool": f"mcp__{salt}__*", "effect": "ask"},
        {"tool": "Task*", "effect": "allow"},
        {"tool": "Bash", "input": {"command": "*rm -rf*"}, "effect": "ask"},
    ]
    return [shapes[i % len(shapes)] for i in range(size)]


def _stored(sizes: tuple[int, int, int, int]) -> dict[Layer, list[dict[str, Any]]]:
    layers = {layer: _layer(size, layer.value) for layer, size in zip(Layer, sizes, strict=True)}
    layers[Layer.session] = [
        *layers[Layer.session],
        {"tool": "Bash", "input": {"command": "git *"}, "effect": "allow"},
        {"tool": "Read", "effect": "allow"},
    ]
    return layers


def _best_us(work: Callable[[], object], number: int) -> float:
    """The fastest of `ROUNDS` rounds of `number` calls, in µs per call."""
    return min(timeit.repeat(work, number=number, repeat=ROUNDS)) / number * 1e6


def measure(sizes: tuple[int, int, int, int]) -> dict[str, float]:
    stored = _stored(sizes)

    def build() -> Any:
        return effective_policy(
            operator=rules_of(stored[Layer.operator]),
            tenant=rules_of(stored[Layer.tenant]),
            session=rules_of(stored[Layer.session]),
            movement=rules_of(stored[Layer.movement]),
            builtin=BUILTIN,
        )

    policy = build()
    layers = policy.layers
    bash = {"command": COMMAND}
    read = {"path": "input/notes.md"}
    assert policy.decide("Bash", bash).effect is Effect.allow
    assert policy.decide("Read", read).layer is Layer.session
    assert policy.decide("Grep", {"pattern": "x"}).by_default
    return {
        "rules": float(sum(len(rules) for rules in layers.values())),
        "decide Bash (input rule)": _best_us(lambda: policy.decide("Bash", bash), 20_000),
        "decide Read (tool rule)": _best_us(lambda: policy.decide("Read", read), 20_000),
        "decide Grep (default)": _best_us(lambda: policy.decide("Grep", {}), 20_000),
        "uncompiled decide Bash": _best_us(
            lambda: decide(layers, "Bash", bash, BUILTIN_DEFAULT), 2_000
        ),
        "effective_policy per turn": _best_us(build, 50),
    }


def main() -> None:
    full = Settings(_env_file=None).tool_policy_max_rules
    for label, sizes in (("plausible", (4, 12, 8, 4)), ("every layer full", (full,) * 4)):
        figures = measure(sizes)
        print(f"{label}: {int(figures.pop('rules'))} rules")
        for name, micros in figures.items():
            print(f"  {name:28} {micros:10.2f} µs")


if __name__ == "__main__":
    main()
