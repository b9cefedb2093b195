"""The context manager (seed 004): ratios, the character estimate, and once-per-movement."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.context import ContextAction, ContextManager, Thresholds

ORDER: list[ContextAction] = ["warn", "prompt", "force_transition", "exhausted"]


def manager(window: int = 1000) -> ContextManager:
    return ContextManager(window, Thresholds())


def test_defaults_are_the_seeds_thresholds() -> None:
    assert Thresholds() == Thresholds(warn=0.70, prompt=0.85, force=0.95, exhausted=0.99)


def test_below_warn_nothing_fires() -> None:
    cm = manager()
    assert cm.observe(iteration=1, input_tokens=699, prompt_chars=0) == []
    assert cm.ratio == pytest.approx(0.699)
    assert not cm.exhausted


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (700, ["warn"]),
        (850, ["warn", "prompt"]),
        (950, ["warn", "prompt", "force_transition"]),
        (990, ORDER),
    ],
)
def test_each_threshold_is_inclusive(tokens: int, expected: list[ContextAction]) -> None:
    assert manager().observe(iteration=1, input_tokens=tokens, prompt_chars=0) == expected


def test_a_jump_returns_every_action_crossed_in_order() -> None:
    cm = manager()
    assert cm.observe(iteration=1, input_tokens=500, prompt_chars=0) == []
    assert cm.observe(iteration=2, input_tokens=970, prompt_chars=0) == [
        "warn",
        "prompt",
        "force_transition",
    ]
    assert cm.ratio == pytest.approx(0.97)


def test_each_action_fires_once_per_movement() -> None:
    cm = manager()
    assert cm.observe(iteration=1, input_tokens=710, prompt_chars=0) == ["warn"]
    assert cm.observe(iteration=2, input_tokens=720, prompt_chars=0) == []
    assert cm.observe(iteration=3, input_tokens=860, prompt_chars=0) == ["prompt"]
    # Dropping below and rising again does not re-fire.
    assert cm.observe(iteration=4, input_tokens=100, prompt_chars=0) == []
    assert cm.observe(iteration=5, input_tokens=900, prompt_chars=0) == []
    assert cm.observe(iteration=6, input_tokens=999, prompt_chars=0) == [
        "force_transition",
        "exhausted",
    ]
    assert cm.exhausted
    assert cm.fired == frozenset(ORDER)
    assert cm.observe(iteration=7, input_tokens=1000, prompt_chars=0) == []


def test_a_new_manager_for_a_new_movement_fires_again() -> None:
    first = manager()
    assert first.observe(iteration=1, input_tokens=800, prompt_chars=0) == ["warn"]
    second = manager()
    assert second.observe(iteration=1, input_tokens=800, prompt_chars=0) == ["warn"]


def test_without_usage_the_first_two_iterations_are_not_estimated() -> None:
    cm = manager()
    huge = 1_000_000
    assert cm.observe(iteration=1, input_tokens=None, prompt_chars=huge) == []
    assert cm.observe(iteration=2, input_tokens=None, prompt_chars=huge) == []
    assert cm.ratio == 0.0
    assert cm.available_tokens() == 1000


def test_without_usage_from_the_third_iteration_characters_are_estimated() -> None:
    cm = ContextManager(1000, Thresholds(), chars_per_token=4.0)
    assert cm.observe(iteration=3, input_tokens=None, prompt_chars=2800) == ["warn"]
    assert cm.used_tokens == 700
    assert cm.ratio == pytest.approx(0.70)
    assert cm.observe(iteration=4, input_tokens=None, prompt_chars=3401) == ["prompt"]
    assert cm.used_tokens == 851  # rounded up: an estimate should not under-count


def test_the_estimate_uses_the_given_chars_per_token() -> None:
    cm = ContextManager(1000, Thresholds(), chars_per_token=2.0)
    assert cm.observe(iteration=3, input_tokens=None, prompt_chars=1900) == [
        "warn",
        "prompt",
        "force_transition",
    ]


def test_measured_usage_wins_over_the_estimate() -> None:
    cm = manager()
    assert cm.observe(iteration=5, input_tokens=100, prompt_chars=10_000_000) == []
    assert cm.used_tokens == 100


def test_a_missing_usage_before_the_third_iteration_keeps_the_last_ratio() -> None:
    cm = manager()
    cm.observe(iteration=1, input_tokens=600, prompt_chars=0)
    assert cm.observe(iteration=2, input_tokens=None, prompt_chars=0) == []
    assert cm.ratio == pytest.approx(0.6)


def test_available_tokens_is_the_rest_of_the_window_never_negative() -> None:
    cm = manager()
    assert cm.available_tokens() == 1000
    cm.observe(iteration=1, input_tokens=400, prompt_chars=0)
    assert cm.available_tokens() == 600
    cm.observe(iteration=2, input_tokens=1200, prompt_chars=0)
    assert cm.available_tokens() == 0
    assert cm.ratio == pytest.approx(1.2)


def test_custom_thresholds_are_honoured() -> None:
    cm = ContextManager(100, Thresholds(warn=0.5, prompt=0.6, force=0.7, exhausted=0.8))
    assert cm.observe(iteration=1, input_tokens=65, prompt_chars=0) == ["warn", "prompt"]


@pytest.mark.parametrize(
    "values",
    [(0.0, 0.85, 0.95, 0.99), (0.9, 0.85, 0.95, 0.99), (0.7, 0.85, 0.99, 0.95)],
)
def test_out_of_order_thresholds_are_refused(values: tuple[float, float, float, float]) -> None:
    warn, prompt, force, exhausted = values
    with pytest.raises(ValueError, match="thresholds"):
        Thresholds(warn=warn, prompt=prompt, force=force, exhausted=exhausted)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        ContextManager(0, Thresholds())
    with pytest.raises(ValueError):
        ContextManager(100, Thresholds(), chars_per_token=0)
    with pytest.raises(ValueError):
        manager().observe(iteration=1, input_tokens=-1, prompt_chars=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1500), max_size=30))
def test_over_any_sequence_each_action_fires_once_in_order(usages: list[int]) -> None:
    cm = manager()
    fired: list[ContextAction] = []
    peak = 0
    for i, tokens in enumerate(usages, start=1):
        fired.extend(cm.observe(iteration=i, input_tokens=tokens, prompt_chars=0))
        peak = max(peak, tokens)
    expected = [a for a, t in Thresholds().ordered() if peak / 1000 >= t]
    assert fired == expected
