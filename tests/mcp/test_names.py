"""The names the model sees for MCP tools, and the filters over them."""

from __future__ import annotations

import pytest

from app.mcp.catalog import offered
from app.mcp.client import ToolInfo
from app.mcp.names import NameClash, ToolFilter, model_name, model_names


def test_characters_outside_the_api_alphabet_become_underscores() -> None:
    assert model_name("git", "log.show/all") == "mcp__git__log_show_all"


def test_two_tools_mapping_to_one_name_clash() -> None:
    with pytest.raises(NameClash, match="both named"):
        model_names("s", ["a.b", "a_b"])


def test_a_name_longer_than_the_api_takes_is_refused() -> None:
    with pytest.raises(NameClash, match="longer"):
        model_names("server", ["x" * 60])


def test_deny_wins_over_allow() -> None:
    rules = ToolFilter(allow=("git_*",), deny=("git_commit",))
    assert [t for t in ("git_log", "git_commit", "other") if rules.admits(t)] == ["git_log"]


def test_an_attachments_globs_narrow_what_the_filter_lets_through() -> None:
    tools = [ToolInfo(name, "", {"type": "object"}) for name in ("a", "b", "c")]
    kept = offered("s", tools, ToolFilter(deny=("c",)), globs=("a", "c"))
    assert [t.name for t in kept] == ["mcp__s__a"]
