"""The benchmark harness: what `make bench` reports is computed and laid out right.

The benchmarks themselves take minutes and are run by `make bench`; these check the
parts every figure goes through, and run the one cheap benchmark end to end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench import capacity, fake_llm, memory_economy, overhead, prompt_cache
from bench.api_throughput import Load, starved, unstarved
from bench.common import Context, DbCounts, HandoffCounter, Row, Section, Stats, step_gaps_ms
from bench.run import BENCHMARKS, render


def test_stats_report_min_median_and_max_of_the_runs() -> None:
    stats = Stats.of([3.0, 1.0, 2.0, 10.0, 4.0], "ms")

    assert (stats.min, stats.median, stats.max) == (1.0, 3.0, 10.0)
    assert stats.cell(1) == "3.0 (1.0\u201310.0) ms"  # an en dash between min and max


def test_stats_refuse_a_figure_without_runs() -> None:
    with pytest.raises(ValueError, match="no values"):
        Stats.of([], "ms")


def test_a_section_names_its_target_and_marks_rows_that_miss_it() -> None:
    section = Section(name="x", title="Thing", target="≤ 2 ms")
    section.rows.append(Row("fast", {"time": "1 ms"}, meets=True))
    section.rows.append(Row("slow", {"time": "9 ms"}, meets=False))
    section.notes.append("Why the slow one is slow.")

    text = section.markdown()

    assert "**Target:** ≤ 2 ms" in text
    assert "| fast | 1 ms | yes |" in text
    assert "| slow | 9 ms | **no** |" in text
    assert "Why the slow one is slow." in text


def test_results_carry_the_machine_and_every_section_in_suite_order() -> None:
    sections = {name: {"markdown": f"## {name} section"} for name in reversed(BENCHMARKS)}

    text = render({"date": "2026-12-02", "commit": "abc1234"}, 5, sections)

    assert "| commit | abc1234 |" in text
    assert "| runs per figure | 5 |" in text
    positions = [text.index(f"## {name} section") for name in BENCHMARKS]
    assert positions == sorted(positions)


def test_a_section_says_the_run_it_was_measured_in() -> None:
    """A benchmark rerun alone keeps the others' figures; each says its own date and
    commit, so the last run's do not date them."""
    earlier = {"date": "2026-12-01", "commit": "old1234"}
    sections = {
        "overhead": {"markdown": "## overhead", "measured": earlier},
        "replay": {"markdown": "## replay"},  # measured in the run the header names
    }

    text = render({"date": "2026-12-02", "commit": "new5678"}, 5, sections)

    assert "*Source: `bench/overhead.py`; measured 2026-12-01 at old1234.*" in text
    assert "*Source: `bench/replay.py`; measured 2026-12-02 at new5678.*" in text


@pytest.mark.sqlite_only  # no database of the suite's: the benchmark makes its own
def test_the_memory_economy_benchmark_sizes_every_fixture_transcript(tmp_path: Path) -> None:
    section = asyncio.run(memory_economy.run(Context(runs=1, quick=True, workdir=tmp_path)))

    transcripts = sorted(
        p.name for p in (Path(__file__).parents[1] / "fixtures" / "claude-code").glob("*.jsonl")
    )
    labels = " ".join(row.label for row in section.rows)
    assert all(name[:20] in labels for name in transcripts)
    total = section.rows[-1]
    assert total.label == "**all files**"
    assert 0 < total.data["block"]["tokens"] < total.data["raw"]["tokens"]


def test_step_gaps_run_from_each_answer_written_to_the_next_request() -> None:
    # (arrived, written), out of order as a fake may report them
    exchanges = [(1.010, 1.012), (1.000, 1.004), (1.015, 1.020)]

    assert step_gaps_ms(exchanges) == pytest.approx([6.0, 3.0])


def test_step_gaps_refuse_overlapping_requests() -> None:
    """Concurrent conversations have no step gaps: the next request is not this one's."""
    with pytest.raises(ValueError, match="overlap"):
        step_gaps_ms([(1.0, 1.5), (1.2, 1.6)])


def test_db_counts_subtract_and_divide_per_step() -> None:
    before, after = DbCounts(2, 10, 4), DbCounts(14, 56, 96)

    steps = after - before

    assert steps == DbCounts(12, 46, 92)
    assert steps.cell(2) == "6.0 tx · 23.0 stmt · 46.0 hand-offs"


def test_handoff_counter_counts_two_per_aiosqlite_call(tmp_path: Path) -> None:
    import aiosqlite

    HandoffCounter.install()

    async def two_calls() -> int:
        before = HandoffCounter.total
        async with aiosqlite.connect(tmp_path / "x.db") as db:  # opening is not counted
            await db.execute("SELECT 1")
        return HandoffCounter.total - before  # the execute and the close

    assert asyncio.run(two_calls()) == 4


def _load(rps: float, cpu_s: float, wall_s: float = 2.0) -> Load:
    return Load(rps, 10.0, int(rps * wall_s), 0, cpu_s=cpu_s, wall_s=wall_s)


def test_cpu_per_request_is_the_servers_cpu_over_the_requests_it_completed() -> None:
    load = _load(rps=500, cpu_s=1.9)

    assert load.cpu_ms_per_request == pytest.approx(1.9)
    assert load.utilisation == pytest.approx(0.95)


def test_a_baseline_short_of_its_core_or_its_best_rate_is_starved() -> None:
    busy, idle, slow = _load(500, 1.9), _load(300, 1.0), _load(200, 1.9)

    assert not starved(busy, best_rps=520, cpu_bound=True)
    assert starved(idle, best_rps=520, cpu_bound=True)  # half its core went elsewhere
    assert starved(slow, best_rps=520, cpu_bound=True)  # busy, yet far below its best
    # on PostgreSQL the server waits for the database: only the rate can tell
    assert not starved(idle, best_rps=520, cpu_bound=False)


def test_pairs_with_a_starved_baseline_are_discarded_and_counted() -> None:
    strata = _load(200, 1.9)
    pairs = [(strata, _load(500, 1.9)), (strata, _load(150, 0.6)), (strata, _load(480, 1.9))]

    kept, discarded = unstarved(pairs, cpu_bound=True)

    assert discarded == 1
    assert [b.rps for _, b in kept] == [500, 480]


def test_throughput_may_not_fall_as_concurrency_grows_beyond_noise() -> None:
    assert capacity.nondecreasing([15.0, 30.0, 29.0])  # within 5%
    assert not capacity.nondecreasing([15.6, 11.6])


def test_the_fakes_typical_request_is_one_of_median_length_and_then_forgotten() -> None:
    """The capacity benchmark's bare loop sends it: a request Strata's turns sent."""
    seen = fake_llm.Requests()
    for length in (1, 3, 3, 5, 7):
        seen.saw({"messages": [{"role": "user", "content": str(n)} for n in range(length)]})

    typical = seen.take_typical()

    assert typical is not None and len(typical["messages"]) == 3
    assert seen.take_typical() is None


async def test_staggered_arrivals_come_in_batches_at_the_rate_the_concurrency_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Strata's staggered runs and the bare loop's like-for-like run share this schedule."""
    monkeypatch.setattr(capacity, "STAGGER_EVERY", 0.001)
    batches: list[tuple[int, int]] = []

    async def arrive(first: int, count: int) -> None:
        batches.append((first, count))

    # 100 concurrent at a 200 ms LLM: 500 a second, so a batch per 1 ms holds 0.5 → 1
    await capacity._staggered(100, 3, arrive)
    monkeypatch.setattr(capacity, "STAGGER_EVERY", 0.05)
    await capacity._staggered(10, 5, arrive)  # 50 a second: 2.5 → 2 a batch (banker's)

    assert batches == [(0, 1), (1, 1), (2, 1), (0, 2), (2, 2), (4, 1)]


async def test_a_staggered_bare_loop_makes_every_call_never_over_concurrency_at_once() -> None:
    """Two calls at most in flight while one arrives every 50 ms and each takes 200 ms."""
    request = {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": [
        {"role": "user", "content": "Just answer."}]}  # fmt: skip
    with fake_llm.running(delay=0.2) as fake:
        out = await capacity.bare_run(fake.url, 2, 6, request, "staggered")
        seen = sorted(fake.take_exchanges())

    measured = seen[2:]  # after the warm-up's round
    in_flight = max(sum(a <= at < w for a, w in measured) for at, _ in measured)
    assert (out.turns, out.failed, len(measured)) == (6, 0, 6)
    assert in_flight == 2


def test_a_capacity_rows_yardstick_drives_its_calls_as_strata_got_its_turns() -> None:
    """After a staggered run the target is taken against the bare loop with the same
    arrivals; after a burst, against the one calling back to back."""
    strata, busy, arriving = (capacity.Outcome(100, 2.0, cpu, 0) for cpu in (0.5, 0.2, 0.25))

    assert capacity.Pair(strata, busy, arriving).yardstick is arriving
    assert capacity.Pair(strata, busy, None).yardstick is busy


def test_the_step_overhead_sessions_take_turns_run_by_run() -> None:
    assert list(overhead.in_turns(["fresh", "long", "tasks"], 2)) == [
        (0, "fresh"),
        (0, "long"),
        (0, "tasks"),
        (1, "fresh"),
        (1, "long"),
        (1, "tasks"),
    ]


def _prompt(*marked: bool) -> list[prompt_cache.Unit]:
    """A prompt of one-token blocks, each prefix its own, marked where told."""
    return [prompt_cache.Unit(f"prefix {n}", 1, mark) for n, mark in enumerate(marked)]


def test_the_cache_model_reads_an_entry_within_the_lookback_and_writes_up_to_the_breakpoint() -> (
    None
):
    cache = prompt_cache.PromptCache(lookback=3)
    cache.bill(_prompt(False, True))  # writes the prefix up to block 1

    assert cache.bill(_prompt(False, True, False, False, True, False)) == prompt_cache.Billing(
        plain=1, written=3, read=2
    )


def test_the_cache_model_misses_an_entry_beyond_the_lookback() -> None:
    cache = prompt_cache.PromptCache(lookback=3)
    cache.bill(_prompt(False, True))  # an entry at block 1, 5 blocks before the next mark

    assert cache.bill(_prompt(False, False, *[False] * 4, True)) == prompt_cache.Billing(written=7)


@pytest.mark.sqlite_only  # no database of the suite's: the benchmark makes its own
def test_the_prompt_cache_benchmark_bills_strata_within_its_bound_of_the_ideal(
    tmp_path: Path,
) -> None:
    section = asyncio.run(prompt_cache.run(Context(runs=1, quick=True, workdir=tmp_path)))

    assert [row.meets for row in section.rows] == [True, True]
    assert all(row.data["ratio"] <= prompt_cache.BOUND for row in section.rows)


def test_lock_waits_count_the_samples_that_found_one_and_the_most_at_once() -> None:
    seen = capacity.LockWaits()
    for waiting in (0, 2, 0, 1):
        seen.saw(waiting)

    assert (seen.samples, seen.waiting, seen.most) == (4, 2, 2)
