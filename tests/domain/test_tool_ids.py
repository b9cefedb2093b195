"""Tool call ids in the Messages API's shape: kept when they have it, rewritten when not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.domain.tool_ids import api_tool_id, is_api_tool_id


def test_an_id_the_api_accepts_is_kept_as_it_is() -> None:
    assert api_tool_id("toolu_01A09q90qw90lq917835lq9") == "toolu_01A09q90qw90lq917835lq9"


def test_an_id_with_a_quote_and_markup_is_rewritten_into_the_apis_shape() -> None:
    rewritten = api_tool_id('toolu_1" hx-post="/console/x"><b id="injected">')

    assert is_api_tool_id(rewritten)
    assert rewritten.startswith("toolu_1__hx-post___console_x___b_id__injected___")


def test_an_id_ending_in_a_line_break_is_not_in_the_apis_shape() -> None:
    assert not is_api_tool_id("toolu_1\n")
    assert is_api_tool_id(api_tool_id("toolu_1\n"))


def test_ids_that_differ_only_in_refused_characters_stay_apart() -> None:
    assert api_tool_id("call.1") != api_tool_id("call:1")


def test_a_long_refused_id_is_rewritten_to_a_bounded_one() -> None:
    assert len(api_tool_id("x." * 50_000)) == 64 + 1 + 16


@given(st.text())
def test_every_id_is_rewritten_into_the_apis_shape_the_same_way_each_time(value: str) -> None:
    rewritten = api_tool_id(value)

    assert is_api_tool_id(rewritten)
    assert api_tool_id(value) == rewritten
    assert api_tool_id(rewritten) == rewritten
