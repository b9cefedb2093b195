"""Memory economy: what the memory block costs a continuing session, next to what it replaces.

Each real Claude Code transcript in `tests/fixtures/claude-code/` is imported into a fresh
migrated SQLite database the way the `Stop` hook imports it (`ingest_transcript`: parse,
append to the mirrored session's log, project turns into L2/L3), then a new Claude Code
session of the same project starts the way the `SessionStart` hook starts it
(`session_start`), and its memory block is what Strata would hand it. Three texts are sized:

- the raw transcript file (JSONL, as Claude Code wrote it);
- the L2 text of the main thread's turns (user and assistant text, what the block draws on);
- the memory block.

There is no tokenizer offline, so tokens are Strata's own estimate (`estimate_tokens`,
4 characters per token), the figure its context manager uses before the API reports usage;
characters are given too.
"""

from __future__ import annotations

import functools
import operator
import time
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import col, select

from app.db.engine import Database
from app.db.migrate import upgrade_to_head
from app.db.models import MemoryTurn, Session
from app.engine.truncation import CHARS_PER_TOKEN, estimate_tokens
from app.services.claude_code import HookSource, ingest_transcript, session_start, start_context
from app.services.memory import BlockLimits, memory_block
from app.settings import Settings
from bench.common import ROOT, Context, Row, Section

NAME = "memory_economy"
TITLE = "Memory economy"
TARGET = (
    "On the real transcripts in `tests/fixtures/`, tokens of the memory block versus tokens "
    "of the raw transcript and versus its L2 text (reported per file)."
)
TRANSCRIPTS = ROOT / "tests" / "fixtures" / "claude-code"
TENANT = "bench"
PROJECT = "/work/project"


@dataclass(frozen=True)
class Size:
    """A text's length in characters and in estimated tokens."""

    chars: int
    tokens: int

    @classmethod
    def of(cls, *texts: str) -> Size:
        return cls(sum(len(t) for t in texts), sum(estimate_tokens(t) for t in texts))

    def __add__(self, other: Size) -> Size:
        return Size(self.chars + other.chars, self.tokens + other.tokens)

    def cell(self) -> str:
        return f"{self.tokens:,} ({self.chars:,} ch)"


@dataclass(frozen=True)
class Economy:
    """One transcript's three texts, and how the block shows its turns."""

    file: str
    raw: Size
    l2: Size
    block: Size
    main_turns: int
    sidechain_turns: int
    l1_lines: int

    def __add__(self, other: Economy) -> Economy:
        return Economy(
            "all files",
            self.raw + other.raw,
            self.l2 + other.l2,
            self.block + other.block,
            self.main_turns + other.main_turns,
            self.sidechain_turns + other.sidechain_turns,
            self.l1_lines + other.l1_lines,
        )

    def share_of(self, size: Size) -> str:
        """The block's tokens as a share of another text's."""
        return f"{self.block.tokens / size.tokens:.1%}" if size.tokens else "—"


def transcripts() -> list[tuple[str, str]]:
    """(file name, text) of every fixture transcript, in name order."""
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(TRANSCRIPTS.glob("*.jsonl"))]


async def measure(name: str, raw: str, workdir: Path) -> Economy:
    """Import one transcript through the hook path and size its texts."""
    stem = name.removesuffix(".jsonl")
    url = f"sqlite:///{workdir / (stem + '.db')}"
    upgrade_to_head(url)
    settings = Settings(_env_file=None, database_url=url)
    database = Database(settings)
    try:
        stop = HookSource(session_id=f"{stem}-1", cwd=PROJECT)
        lines = raw.split("\n")
        report = await ingest_transcript(database, settings, TENANT, stop, lambda: iter(lines))
        start = HookSource(session_id=f"{stem}-2", cwd=PROJECT)
        successor = await database.write(lambda db: session_start(db, TENANT, start))
        async with database.read() as db:
            block = await start_context(db, settings, TENANT, successor.id)
            counts = (
                await memory_block(
                    db, TENANT, successor.id, limits=BlockLimits.of(settings), tz=settings.zone
                )
            ).counts
            sidechains = select(Session.id).where(Session.parent_session_id == report.session_id)
            main = (
                await db.exec(select(MemoryTurn).where(MemoryTurn.session_id == report.session_id))
            ).all()
            side = (
                await db.exec(select(MemoryTurn).where(col(MemoryTurn.session_id).in_(sidechains)))
            ).all()
    finally:
        await database.dispose()
    return Economy(
        file=name,
        raw=Size.of(raw),
        l2=Size.of(*(t.user_text for t in main), *(t.assistant_text for t in main)),
        block=Size.of(block),
        main_turns=len(main),
        sidechain_turns=len(side),
        l1_lines=counts.l1_turns,
    )


def row(e: Economy, label: str) -> Row:
    return Row(
        label,
        {
            "raw transcript, tokens (chars)": e.raw.cell(),
            "L2 text": e.l2.cell(),
            "memory block": e.block.cell(),
            "block / raw": e.share_of(e.raw),
            "block / L2": e.share_of(e.l2),
            "turns: main (+ sidechain)": f"{e.main_turns} (+{e.sidechain_turns})",
        },
        None,
        {
            "raw": vars(e.raw),
            "l2": vars(e.l2),
            "block": vars(e.block),
            "main_turns": e.main_turns,
            "sidechain_turns": e.sidechain_turns,
            "block_l1_lines": e.l1_lines,
        },
    )


async def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, TARGET)
    started = time.perf_counter()
    results = [await measure(name, raw, ctx.workdir) for name, raw in transcripts()]
    elapsed = time.perf_counter() - started
    section.rows = [row(e, f"`{e.file}`") for e in results]
    section.rows.append(row(functools.reduce(operator.add, results), "**all files**"))
    most = max(e.main_turns for e in results)
    l1 = sum(e.l1_lines for e in results)
    with_images = " and ".join(f"`{e.file}`" for e in results if "images" in e.file)
    section.notes = [
        "Each file is imported into a fresh database through the `Stop` hook's service "
        "(`ingest_transcript`), then a new session of the same project starts through the "
        "`SessionStart` hook's (`session_start`); its memory block is the one counted. "
        "Sizes only, so one run; no timing is reported "
        f"(the {len(results)} imports took {elapsed:.1f} s in all).",
        "**Tokens are estimated**, not counted: there is no tokenizer offline, so every token "
        f"figure is Strata's own `estimate_tokens` (characters / {CHARS_PER_TOKEN}, rounded up), "
        "the estimate its context manager falls back on. Real counts differ by text (code and "
        "JSON usually take more tokens per character than English prose).",
        "**What the block holds.** The predecessor chain's last 20 turns in full (their L2: "
        "user and assistant text, each line stamped `[HH:MM:SS]`), older turns as one-line L1 "
        "summaries, and a closing line on how to fetch a turn's details by its time. No "
        f"fixture has more than 20 main-thread turns (the most is {most}), so every block is "
        f"L2 only ({l1} L1 lines in all): no summary model was involved and none was run, and "
        "the question of L1's fallback (a turn not yet summarized shows its L2 text; a failed "
        "summary stores the L2 text as L1) does not arise. In a longer history the turns before "
        "the last 20 would be shown by their L1 summaries, which aim at 1/5 of the L2 length.",
        "**Block above 100% of L2.** The block is the L2 text plus its framing: "
        "`[HH:MM:SS] [user]: ` / `[HH:MM:SS] [assistant]: ` on every line, two headings and "
        "the closing detail hint (about 220 characters); on these short histories the framing is "
        "5-20% of the block.",
        "**Raw versus L2.** The raw file is what Claude Code keeps, not what it sends: JSON "
        "envelopes on every line, tool inputs and outputs, thinking, sidechains (a subagent's "
        "thread is mirrored into a session of its own and is not in the main thread's block). "
        "The block leaves out what the seed puts in L3 (tool I/O, system messages, images), "
        "which stays one `Detail` look-up away. "
        f"In {with_images}, base64 image data counts as text in the raw figure, which "
        "overstates what an image costs the model (priced by its pixels).",
        "**Empty blocks.** `fasthooks__sample_agent_sidechain.jsonl` holds only a subagent's "
        "thread, so the main session has no turns; `session-share__images-in-tool-results.jsonl` "
        "has one turn whose only content is a tool result (an image) with no user or assistant "
        "text, so its L2 is empty and there is nothing to show.",
    ]
    return section
