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

As a section of `make bench` (`--only tool_policy`), it also runs real chat turns: the
turn `overhead` runs (an in-process runner, the fake answering a `current_time` call each
time, `REQUESTS_PER_TURN` requests) in a session without rules and in one whose layer
holds `STRATA_TOOL_POLICY_MAX_RULES` `allow` rules that each match every call, taking
turns run by run on fresh copies of one database; a run's figure is the median step gap
the fake saw, and the ratio is taken pair by pair.

Run alone: `.venv/bin/python -m bench.tool_policy` (the per-call figures only).
"""

from __future__ import annotations

import os
import shutil
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import Session
from app.db.repositories.rows import RowRepository
from app.domain.tool_policy import BUILTIN_DEFAULT, Effect, Layer, decide, rules_of
from app.services.tool_policy import effective_policy
from app.settings import Settings
from bench import fake_llm
from bench.common import Context, Row, Section, Stats, step_gaps_ms
from bench.overhead import in_turns, strata_turn
from bench.seed import session_with_log

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


def measure(sizes: tuple[int, int, int, int], calls: int = 20_000) -> dict[str, float]:
    """The per-call figures on layers of `sizes` rules, each the best round of `calls`
    calls (a tenth of them uncompiled, a 400th of them compiling every layer)."""
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
        "decide Bash (input rule)": _best_us(lambda: policy.decide("Bash", bash), calls),
        "decide Read (tool rule)": _best_us(lambda: policy.decide("Read", read), calls),
        "decide Grep (default)": _best_us(lambda: policy.decide("Grep", {}), calls),
        "uncompiled decide Bash": _best_us(
            lambda: decide(layers, "Bash", bash, BUILTIN_DEFAULT),
            max(1, calls // 10),
        ),
        "effective_policy per turn": _best_us(build, max(1, calls // 400)),
    }


# --- the section of `make bench`: a real turn with and without rules ---------------------

TOOL = "current_time"
REQUESTS_PER_TURN = 12
SEGMENT = 100
RUNS_FACTOR = 3
"""Runs per figure here, as a multiple of the report's: a pair of turns takes a second or
two, and a run's median gap moves by ~0.1 ms from run to run."""
TARGET_RATIO = 1.05
"""The turn with rules may cost no more than the one without, within the noise that one
run on a loaded machine shows between two identical turns."""


def allow_every_call(count: int) -> list[dict[str, Any]]:
    """`count` stored `allow` rules, each matching every call of the benchmark's turn (the
    last one decides: within a layer the last match wins)."""
    shapes = [{"tool": TOOL, "effect": "allow"}, {"tool": "*", "effect": "allow"}]
    return [shapes[i % len(shapes)] for i in range(count)]


def _settings(url: str, database_url: str, data_dir: Path) -> Settings:
    return Settings(
        _env_file=None,
        database_url=database_url,
        data_dir=data_dir,
        anthropic_base_url=url,
        anthropic_api_key="bench",
        llm_max_retries=0,
        agent_max_iterations=REQUESTS_PER_TURN,
    )


async def _templates(
    workdir: Path, segment: int, rules: list[dict[str, Any]]
) -> list[tuple[Path, str]]:
    """Two databases holding one session of `segment` items: without rules, and with
    `rules` as its layer (written as `PATCH /sessions` writes them)."""
    made: list[tuple[Path, str]] = []
    for name, layer in (("plain", None), ("ruled", rules)):
        path = workdir / f"{name}.db"
        url = f"sqlite:///{path}"
        upgrade_to_head(url)
        database = Database(Settings(_env_file=None, database_url=url, data_dir=workdir))
        try:
            session_id = await session_with_log(database, segment, segment)

            async def set_rules(
                db: AsyncSession, layer: Any = layer, sid: str = session_id
            ) -> None:
                row = await RowRepository(db).by_id(Session, sid)
                assert row is not None
                row.tool_policy = layer
                await RowRepository(db).save(row)

            await database.write(set_rules)
        finally:
            await database.dispose()
        made.append((path, session_id))
    return made


async def run(ctx: Context) -> Section:
    rules = Settings(_env_file=None).tool_policy_max_rules
    section = Section(
        name="tool_policy",
        title="Tool policy: a turn whose every call an allow rule decides, and a decision",
        target=(
            f"a chat turn with {rules} allow rules matching every call costs no more than "
            f"one without rules: step-gap ratio ≤ {TARGET_RATIO:g} (median of pairs); a "
            "decision per call is a few µs, in memory"
        ),
    )
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    segment = ctx.scale(SEGMENT, 20)
    plain, ruled = await _templates(ctx.workdir, segment, allow_every_call(rules))
    gaps: dict[str, list[float]] = {"plain": [], "ruled": []}
    with fake_llm.running(delay=0.0, tool=TOOL) as fake:

        async def one(template: tuple[Path, str]) -> float:
            db = ctx.workdir / "run.db"
            shutil.copyfile(template[0], db)
            settings = _settings(fake.url, f"sqlite:///{db}", ctx.workdir / "data")
            fake.take_exchanges()
            await strata_turn(settings, template[1], "Go on.")
            gap = Stats.of(step_gaps_ms(fake.take_exchanges()), "ms").median
            db.unlink()
            return gap

        await one(plain)  # warm-up: imports, statement caches, the fake
        await one(ruled)
        for _, (label, template) in in_turns(
            [("plain", plain), ("ruled", ruled)], RUNS_FACTOR * ctx.runs
        ):
            gaps[label].append(await one(template))
    ratio = Stats.of([r / p for r, p in zip(gaps["ruled"], gaps["plain"], strict=True)], "×")
    without, with_rules = Stats.of(gaps["plain"], "ms"), Stats.of(gaps["ruled"], "ms")
    section.rows.append(
        Row(
            label="chat turn, step gap",
            cells={
                "without rules": without.cell(),
                f"{rules} allow rules on every call": with_rules.cell(),
                "ratio (with / without)": ratio.cell(3),
            },
            meets=ratio.median <= TARGET_RATIO,
            data={
                "without": without.as_dict(),
                "with": with_rules.as_dict(),
                "ratio": ratio.as_dict(),
                "rules": rules,
            },
        )
    )
    full = Settings(_env_file=None).tool_policy_max_rules
    for label, sizes in (("plausible layers", (4, 12, 8, 4)), ("every layer full", (full,) * 4)):
        figures = measure(sizes, ctx.scale(20_000, 50))
        count = int(figures.pop("rules"))
        section.rows.append(
            Row(
                label=f"decision, {label} ({count} rules)",
                cells={
                    "per call, input rule": f"{figures['decide Bash (input rule)']:.2f} µs",
                    "per call, tool rule": f"{figures['decide Read (tool rule)']:.2f} µs",
                    "per call, default": f"{figures['decide Grep (default)']:.2f} µs",
                    "compiled per turn": f"{figures['effective_policy per turn']:.1f} µs",
                },
                data=figures,
            )
        )
    section.notes.append(
        f"{RUNS_FACTOR * ctx.runs} pairs of turns, the two sessions taking turns run by run "
        f"on fresh copies of their database (a segment of {segment} items); each turn makes "
        f"{REQUESTS_PER_TURN} requests, every answer a `{TOOL}` call, so {REQUESTS_PER_TURN - 1} "
        "calls per turn go past the policy. A run's figure is the median of its step gaps as "
        "the fake saw them (answer written → next request arrived); the ratio is taken pair "
        "by pair. One warm-up turn of each is discarded. The decision rows are CPU time of "
        "`Policy.decide` on this process (best of several rounds of many calls, `timeit`), "
        "the per-turn figure compiling every layer from its stored JSON."
    )
    section.notes.append(
        f"The machine's load average (1 min) was {load_before:.1f} when the section started "
        f"and {os.getloadavg()[0]:.1f} when it ended, on {os.cpu_count()} cores: a load above "
        "the cores means other work shared them, which widens every min–max; the pairs "
        "share it alike."
    )
    section.notes.append(f"This section took {time.monotonic() - started:.0f} s.")
    shutil.rmtree(ctx.workdir / "data", ignore_errors=True)
    return section


def main() -> None:
    full = Settings(_env_file=None).tool_policy_max_rules
    for label, sizes in (("plausible", (4, 12, 8, 4)), ("every layer full", (full,) * 4)):
        figures = measure(sizes)
        print(f"{label}: {int(figures.pop('rules'))} rules")
        for name, micros in figures.items():
            print(f"  {name:28} {micros:10.2f} µs")


if __name__ == "__main__":
    main()
