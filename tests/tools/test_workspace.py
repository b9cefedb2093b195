"""Workspace tools: confinement for every tool that takes a path, normal use, truncation, Bash."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from app.engine.tools import ToolContext, ToolOutput, ToolRegistry
from app.engine.truncation import CHARS_PER_TOKEN, TRUNCATION_MARKER
from app.engine.workspace import Workspace
from app.tools.sandbox import SANDBOX_ROOT, bwrap_works
from app.tools.workspace import WORKSPACE_TOOL_NAMES, ResultBudget, workspace_tools

ESCAPES = [
    "../secret.txt",
    "/etc/passwd",
    "sub/../../x",
    "input/link_file",
    "input/link_dir",
    "input/link_dir/secret.txt",
    "input/dangling",
]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("TOPSECRET\n")
    (tmp_path / "secret.txt").write_text("TOPSECRET\n")
    return folder


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Workspace:
    workspace = Workspace(tmp_path / "ws")
    workspace.ensure_layout()
    root = workspace.root
    (root / "input" / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    (root / "input" / "data.csv").write_text("id,name\n1,alpha\n")
    (root / "output" / "draft.md").write_text("# Draft\nTODO one\nTODO two\n")
    (root / "logs" / "lessons.jsonl").write_text("{}\n")
    os.symlink(outside / "secret.txt", root / "input" / "link_file")
    os.symlink(outside, root / "input" / "link_dir")
    os.symlink(outside / "created-by-escape.txt", root / "input" / "dangling")
    return workspace


def make_registry(**kwargs: Any) -> ToolRegistry:
    options: dict[str, Any] = {"bash_enabled": True, "bash_timeout_seconds": 10.0}
    options.update(kwargs)
    return ToolRegistry(workspace_tools(**options))


async def call(
    ws: Workspace | None,
    name: str,
    result_tokens: int | None = 2000,
    registry: ToolRegistry | None = None,
    **raw: Any,
) -> ToolOutput:
    registry = registry or make_registry()
    ctx = ToolContext(
        tenant="t", session_id="s", job_id="j", workspace=ws, result_tokens=result_tokens
    )
    return await registry.run(ctx, name, raw, registry.names, tool_use_id="toolu_1")


def assert_refused(result: ToolOutput) -> None:
    assert result.is_error, result.content
    assert re.search(r"leaves the workspace|is absolute", result.content), result.content
    assert "TOPSECRET" not in result.content


def assert_outside_untouched(tmp_path: Path) -> None:
    assert (tmp_path / "outside" / "secret.txt").read_text() == "TOPSECRET\n"
    assert (tmp_path / "secret.txt").read_text() == "TOPSECRET\n"
    assert not (tmp_path / "outside" / "created-by-escape.txt").exists()
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------ registry shape


def test_tool_set() -> None:
    names = [tool.name for tool in workspace_tools(bash_enabled=False, bash_timeout_seconds=5)]
    assert names == ["Read", "Write", "Edit", "Glob", "Grep"]
    tools = workspace_tools(bash_enabled=True, bash_timeout_seconds=5)
    assert tuple(tool.name for tool in tools) == WORKSPACE_TOOL_NAMES
    assert not any(tool.in_chat for tool in tools)
    for tool in tools:
        assert tool.spec().input_schema["additionalProperties"] is False


@pytest.mark.parametrize("name", WORKSPACE_TOOL_NAMES)
async def test_without_workspace(name: str) -> None:
    raw: dict[str, Any] = {
        "Read": {"path": "a"},
        "Write": {"path": "a", "content": ""},
        "Edit": {"path": "a", "old_string": "x", "new_string": "y"},
        "Glob": {"pattern": "*"},
        "Grep": {"pattern": "x"},
        "Bash": {"command": "true"},
    }[name]
    result = await call(None, name, **raw)
    assert result.is_error
    assert result.content == "workspace tools need a job workspace"


# ------------------------------------------------------------------ confinement


@pytest.mark.parametrize("path", ESCAPES)
async def test_read_escape(ws: Workspace, tmp_path: Path, path: str) -> None:
    assert_refused(await call(ws, "Read", path=path))


@pytest.mark.parametrize("path", ESCAPES)
async def test_write_escape(ws: Workspace, tmp_path: Path, path: str) -> None:
    assert_refused(await call(ws, "Write", path=path, content="pwned\n"))
    assert_outside_untouched(tmp_path)


@pytest.mark.parametrize("path", ESCAPES)
async def test_edit_escape(ws: Workspace, tmp_path: Path, path: str) -> None:
    result = await call(ws, "Edit", path=path, old_string="TOPSECRET", new_string="pwned")
    assert_refused(result)
    assert_outside_untouched(tmp_path)


@pytest.mark.parametrize("path", ESCAPES)
async def test_grep_escape(ws: Workspace, path: str) -> None:
    assert_refused(await call(ws, "Grep", pattern="TOPSECRET", path=path))


@pytest.mark.parametrize("pattern", ["../*", "/**", "/etc/*", "../../**", "sub/../../*", "~/*"])
async def test_glob_escape(ws: Workspace, pattern: str) -> None:
    assert_refused(await call(ws, "Glob", pattern=pattern))


@pytest.mark.parametrize("glob", ["../*", "/**/*.txt"])
async def test_grep_glob_escape(ws: Workspace, glob: str) -> None:
    assert_refused(await call(ws, "Grep", pattern="x", glob=glob))


async def test_listing_never_follows_links_out(ws: Workspace) -> None:
    everything = await call(ws, "Glob", pattern="**")
    assert not everything.is_error
    assert "secret" not in everything.content
    assert "link_" not in everything.content and "dangling" not in everything.content
    through_link = await call(ws, "Glob", pattern="input/link_dir/*")
    assert through_link.content == "no files match 'input/link_dir/*'"
    grep = await call(ws, "Grep", pattern="TOPSECRET")
    assert grep.content == "no matches for 'TOPSECRET' in '.'"


async def test_link_inside_is_followed(ws: Workspace) -> None:
    os.symlink(ws.root / "input" / "notes.txt", ws.root / "output" / "notes-link")
    result = await call(ws, "Read", path="output/notes-link", limit=1)
    assert result.content.startswith("alpha\n")


# ------------------------------------------------------------------ Read


async def test_read_whole_file(ws: Workspace) -> None:
    result = await call(ws, "Read", path="input/notes.txt")
    assert not result.is_error
    assert result.content == "alpha\nbeta\ngamma\ndelta\n"


async def test_read_offset_and_limit(ws: Workspace) -> None:
    middle = await call(ws, "Read", path="input/notes.txt", offset=2, limit=2)
    assert middle.content.startswith("beta\ngamma\n")
    assert "offset=4" in middle.content
    tail = await call(ws, "Read", path="input/notes.txt", offset=4)
    assert tail.content == "delta\n"
    exact = await call(ws, "Read", path="input/notes.txt", offset=3, limit=2)
    assert exact.content == "gamma\ndelta\n"


async def test_read_errors(ws: Workspace) -> None:
    past = await call(ws, "Read", path="input/notes.txt", offset=9)
    assert past.is_error and "has 4 lines" in past.content
    missing = await call(ws, "Read", path="input/nope.txt")
    assert missing.is_error and "no such file" in missing.content
    folder = await call(ws, "Read", path="input")
    assert folder.is_error and "directory" in folder.content
    (ws.root / "input" / "blob.bin").write_bytes(b"\x00\x01\x02")
    binary = await call(ws, "Read", path="input/blob.bin")
    assert binary.is_error and "binary" in binary.content
    bad_offset = await call(ws, "Read", path="input/notes.txt", offset=0)
    assert bad_offset.is_error and "invalid input" in bad_offset.content
    extra = await call(ws, "Read", path="input/notes.txt", mode="rb")
    assert extra.is_error and "extra" in extra.content.lower()
    (ws.root / "input" / "empty.txt").write_text("")
    empty = await call(ws, "Read", path="input/empty.txt")
    assert not empty.is_error and "empty" in empty.content


async def test_read_large_file_is_cut_at_a_line_and_says_how_to_read_on(ws: Workspace) -> None:
    lines = [f"line {n:05d} of the big file\n" for n in range(1, 20_001)]
    (ws.root / "input" / "big.txt").write_text("".join(lines))
    result = await call(ws, "Read", path="input/big.txt", result_tokens=2000)
    budget_chars = 2000 * CHARS_PER_TOKEN  # 50% of 4000 tokens
    assert not result.is_error
    assert len(result.content) <= budget_chars
    body, _, note = result.content.partition(f"\n{TRUNCATION_MARKER}")
    assert note, "a cut result carries the note"
    shown = body.splitlines()
    assert shown == [line.rstrip("\n") for line in lines[: len(shown)]]  # whole lines only
    next_offset = len(shown) + 1
    assert f"offset={next_offset}" in note
    # reading on continues exactly where the cut was
    more = await call(ws, "Read", path="input/big.txt", offset=next_offset, result_tokens=2000)
    assert more.content.startswith(lines[next_offset - 1])


async def test_read_one_enormous_line_is_cut_at_a_character(ws: Workspace) -> None:
    text = "".join(chr(ord("a") + n % 26) for n in range(300_000))
    (ws.root / "input" / "minified.js").write_text(text)
    result = await call(ws, "Read", path="input/minified.js", result_tokens=2000)
    assert not result.is_error
    assert len(result.content) <= 2000 * CHARS_PER_TOKEN
    body, _, note = result.content.partition(f"\n{TRUNCATION_MARKER}")
    assert note
    assert len(body) > 1000 and text.startswith(body)


async def test_read_notes_the_true_totals_of_a_file_larger_than_it_collected(
    ws: Workspace,
) -> None:
    """A file of 6,000 lines and 552,000 characters is noted as such, not with the totals
    of the part Read collected ("lines 1-2606 of 5218 (… of 480000 characters)")."""
    lines = [f"{n:06d} " + "r" * 84 + "\n" for n in range(1, 6001)]  # 92 characters each
    (ws.root / "input" / "big.txt").write_text("".join(lines))

    result = await call(ws, "Read", path="input/big.txt", result_tokens=50_000)

    assert re.search(r"showing lines 1-\d+ of 6000 \(\d+ of 552000 characters\)", result.content)


async def test_read_takes_a_character_offset_to_read_on_inside_a_long_line(
    ws: Workspace,
) -> None:
    """A long single-line file can be read on past the first cut, by a character offset."""
    text = "".join(f"<{n:07d}>" for n in range(60_000))  # 540,000 characters, one line
    (ws.root / "input" / "one-line.json").write_text(text)
    first = await call(ws, "Read", path="input/one-line.json", result_tokens=2000)
    go_on = re.search(r"offset=1 and char_offset=(\d+)", first.content)
    assert go_on, first.content[-300:]
    offset = int(go_on.group(1))

    second = await call(
        ws, "Read", path="input/one-line.json", char_offset=offset, result_tokens=2000
    )

    assert second.content.startswith(text[offset : offset + 1000])
    assert first.content.startswith(text[:offset])
    assert f"of {len(text)}" in second.content


async def test_a_character_offset_past_the_end_of_its_line_is_an_error(ws: Workspace) -> None:
    result = await call(ws, "Read", path="input/notes.txt", offset=2, char_offset=10)

    assert result.is_error
    assert "line 2 of 'input/notes.txt' has 4 characters" in result.content


async def test_grep_marks_a_cut_line_and_says_how_to_read_it(ws: Workspace) -> None:
    """Grep marks a line it cut at 400 characters and says how to read it whole."""
    (ws.root / "input" / "wide.txt").write_text("short NEEDLE\n" + "NEEDLE " + "w" * 993 + "\n")

    result = await call(ws, "Grep", pattern="NEEDLE", path="input/wide.txt")

    first, second, note = result.content.splitlines()
    assert first == "input/wide.txt:1:short NEEDLE"
    assert second.endswith("[…line cut: 600 more characters; Read offset=2 char_offset=400]")
    assert "1 matching line longer than 400 characters cut" in note


async def test_read_without_context_manager_uses_the_cap(ws: Workspace) -> None:
    (ws.root / "input" / "mid.txt").write_text("x" * 50 + "\n" * 2000)
    result = await call(ws, "Read", path="input/mid.txt", result_tokens=None)
    assert TRUNCATION_MARKER not in result.content


async def test_budget_settings_apply(ws: Workspace) -> None:
    """Called on its own (no share of a response's budget), a tool keeps to the cap."""
    registry = make_registry(budget=ResultBudget(ratio=0.5, max_tokens=2000, min_tokens=1000))
    (ws.root / "input" / "big.txt").write_text("y" * 79 + "\n" * 1 + "z" * 20_000)
    result = await call(ws, "Read", registry=registry, path="input/big.txt", result_tokens=None)
    assert len(result.content) <= 2000 * CHARS_PER_TOKEN
    assert len(result.content) > 1000 * CHARS_PER_TOKEN


# ------------------------------------------------------------------ Write / Edit


async def test_write_then_read(ws: Workspace) -> None:
    result = await call(ws, "Write", path="output/sub/dir/report.md", content="# Report\nok\n")
    assert not result.is_error
    assert result.content == "created output/sub/dir/report.md (12 bytes)"
    again = await call(ws, "Write", path="output/sub/dir/report.md", content="v2\n")
    assert again.content.startswith("overwrote")
    read = await call(ws, "Read", path="output/sub/dir/report.md")
    assert read.content == "v2\n"
    top = await call(ws, "Write", path="notes.md", content="x")
    assert not top.is_error and (ws.root / "notes.md").read_text() == "x"


async def test_write_refuses_logs_and_folders(ws: Workspace) -> None:
    logs = await call(ws, "Write", path="logs/lessons.jsonl", content="forged")
    assert logs.is_error and "logs/" in logs.content
    assert (ws.root / "logs" / "lessons.jsonl").read_text() == "{}\n"
    os.symlink(ws.root / "logs", ws.root / "output" / "logs-link")
    via_link = await call(ws, "Write", path="output/logs-link/x.txt", content="forged")
    assert via_link.is_error and not (ws.root / "logs" / "x.txt").exists()
    folder = await call(ws, "Write", path="output", content="x")
    assert folder.is_error and "directory" in folder.content
    under_file = await call(ws, "Write", path="output/draft.md/x", content="x")
    assert under_file.is_error


async def test_edit_unique(ws: Workspace) -> None:
    result = await call(ws, "Edit", path="input/notes.txt", old_string="beta", new_string="BETA")
    assert not result.is_error and result.content == "replaced 1 occurrence in input/notes.txt"
    assert (ws.root / "input" / "notes.txt").read_text() == "alpha\nBETA\ngamma\ndelta\n"


async def test_edit_not_unique_then_replace_all(ws: Workspace) -> None:
    path = "output/draft.md"
    ambiguous = await call(ws, "Edit", path=path, old_string="TODO", new_string="DONE")
    assert ambiguous.is_error and "occurs 2 times" in ambiguous.content
    assert (ws.root / path).read_text() == "# Draft\nTODO one\nTODO two\n"
    unique = await call(ws, "Edit", path=path, old_string="TODO two", new_string="DONE two")
    assert not unique.is_error
    every = await call(ws, "Edit", path=path, old_string="O", new_string="0", replace_all=True)
    assert every.content == "replaced 3 occurrences in output/draft.md"
    assert (ws.root / path).read_text() == "# Draft\nT0D0 one\nD0NE two\n"


async def test_edit_errors(ws: Workspace) -> None:
    path = "input/notes.txt"
    missing = await call(ws, "Edit", path=path, old_string="omega", new_string="x")
    assert missing.is_error and "not found" in missing.content
    same = await call(ws, "Edit", path=path, old_string="beta", new_string="beta")
    assert same.is_error
    empty = await call(ws, "Edit", path=path, old_string="", new_string="x")
    assert empty.is_error
    logs = await call(ws, "Edit", path="logs/lessons.jsonl", old_string="{}", new_string="[]")
    assert logs.is_error and "logs/" in logs.content
    nofile = await call(ws, "Edit", path="output/nope.md", old_string="a", new_string="b")
    assert nofile.is_error and "no such file" in nofile.content


# ------------------------------------------------------------------ Glob / Grep


async def test_glob(ws: Workspace) -> None:
    (ws.root / "output" / "deep" / "er").mkdir(parents=True)
    (ws.root / "output" / "deep" / "er" / "x.md").write_text("x")

    async def glob(pattern: str) -> str:
        result = await call(ws, "Glob", pattern=pattern)
        assert not result.is_error, result.content
        return result.content

    assert await glob("input/*") == "input/data.csv\ninput/notes.txt"
    assert await glob("**/*.md") == "output/deep/er/x.md\noutput/draft.md"
    assert await glob("output/**/*.md") == "output/deep/er/x.md\noutput/draft.md"
    assert await glob("output/*.md") == "output/draft.md"
    assert await glob("./input/*.{csv,txt}") == "input/data.csv\ninput/notes.txt"
    assert await glob("input/[dn]*.???") == "input/data.csv\ninput/notes.txt"
    assert await glob("input/[!n]*") == "input/data.csv"
    assert await glob("*.md") == "no files match '*.md'"


async def test_glob_many_results_fit_the_budget(ws: Workspace) -> None:
    many = ws.root / "output" / "many"
    many.mkdir()
    for n in range(3000):
        (many / f"file-{n:04d}-with-a-longish-name.txt").write_text("")
    result = await call(ws, "Glob", pattern="output/many/*", result_tokens=1000)
    assert len(result.content) <= 1000 * CHARS_PER_TOKEN
    assert result.content.splitlines()[0] == "output/many/file-0000-with-a-longish-name.txt"
    assert "of 3000 files shown" in result.content.splitlines()[-1]


async def test_grep(ws: Workspace) -> None:
    everywhere = await call(ws, "Grep", pattern="alpha")
    assert everywhere.content == "input/data.csv:2:1,alpha\ninput/notes.txt:1:alpha"
    folder = await call(ws, "Grep", pattern="^T.DO", path="output")
    assert folder.content == "output/draft.md:2:TODO one\noutput/draft.md:3:TODO two"
    one_file = await call(ws, "Grep", pattern="(?i)GAMMA", path="input/notes.txt")
    assert one_file.content == "input/notes.txt:3:gamma"
    by_name = await call(ws, "Grep", pattern="alpha", glob="*.csv")
    assert by_name.content == "input/data.csv:2:1,alpha"
    by_path = await call(ws, "Grep", pattern="a", glob="output/**")
    assert by_path.content.startswith("output/draft.md:1:# Draft")
    bad = await call(ws, "Grep", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in bad.content
    none = await call(ws, "Grep", pattern="zzz")
    assert none.content == "no matches for 'zzz' in '.'"


async def test_grep_output_is_cut_to_budget(ws: Workspace) -> None:
    (ws.root / "input" / "log.txt").write_text("".join(f"ERROR {n}\n" for n in range(10_000)))
    result = await call(ws, "Grep", pattern="ERROR", result_tokens=1000)
    assert len(result.content) <= 1000 * CHARS_PER_TOKEN
    lines = result.content.splitlines()
    assert lines[0] == "input/log.txt:1:ERROR 0"
    assert "matching lines shown" in lines[-1] and "narrow" in lines[-1]


# ------------------------------------------------------------------ Bash


async def test_bash_runs_in_the_workspace(ws: Workspace) -> None:
    result = await call(ws, "Bash", command="pwd; ls input; echo oops >&2; exit 3")
    assert not result.is_error
    assert result.content.splitlines() == [
        SANDBOX_ROOT if bwrap_works() else str(ws.root),
        "dangling",
        "data.csv",
        "link_dir",
        "link_file",
        "notes.txt",
        "oops",
        "[Exit code: 3]",
    ]


async def test_bash_minimal_environment(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "secret-key-value")
    monkeypatch.setenv("STRATA_DATABASE_URL", "sqlite:///secret")
    monkeypatch.setenv("SOME_OTHER_VAR", "leak")
    result = await call(ws, "Bash", command="env")
    env = dict(line.split("=", 1) for line in result.content.splitlines()[:-1] if "=" in line)
    assert "secret" not in result.content and "leak" not in result.content
    assert not any(name.startswith(("ANTHROPIC_", "STRATA_")) for name in env)
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["HOME"] == (SANDBOX_ROOT if bwrap_works() else str(ws.root))
    assert env["LANG"] == "C.UTF-8"
    assert set(env) <= {"PATH", "HOME", "LANG", "PWD", "SHLVL", "OLDPWD", "_"}


async def test_bash_stdin_is_closed(ws: Workspace) -> None:
    result = await call(ws, "Bash", command="cat; echo done", timeout_seconds=5)
    assert result.content == "done\n[Exit code: 0]"


def _running(argv: list[str]) -> list[int]:
    """Live (not zombie) processes whose command line is exactly `argv`: seen from the
    host, whatever pid namespace bwrap gave the command."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline == wanted and state != "Z":
            found.append(int(entry.name))
    return found


def _gone(argv: list[str], seconds: float = 2.0) -> bool:
    """Whether no process runs `argv`, after giving SIGKILL a moment to be reaped."""
    deadline = time.monotonic() + seconds
    while _running(argv) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _running(argv) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_bash_timeout_kills_the_process_group(ws: Workspace) -> None:
    background = ["sleep", "5.2718"]
    result = await call(
        ws,
        "Bash",
        command=f"{' '.join(background)} & sleep 5; echo never",
        timeout_seconds=0.5,
    )
    assert result.is_error
    assert "Timed out after 0.5 seconds" in result.content
    assert "never" not in result.content
    assert _gone(background)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_bash_background_processes_do_not_outlive_the_call(ws: Workspace) -> None:
    background = ["sleep", "30.1414"]
    result = await call(ws, "Bash", command=f"{' '.join(background)} & echo started")
    assert result.content == "started\n[Exit code: 0]"
    assert _gone(background)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_bash_cancelled_mid_run_kills_its_process_group(ws: Workspace) -> None:
    """A job cancelled while its Bash call runs (the runner cancels the job's task) must
    leave none of the command's processes behind, background ones included."""
    foreground, background = ["sleep", "31.4159"], ["sleep", "27.1828"]
    command = f"{' '.join(background)} & {' '.join(foreground)}"
    running = asyncio.create_task(call(ws, "Bash", command=command, timeout_seconds=60))
    for _ in range(500):
        if _running(foreground) and _running(background):
            break
        await asyncio.sleep(0.01)
    assert _running(foreground) and _running(background)

    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    for _ in range(200):  # the kill is sent at once; the kernel reaps a moment later
        if not _running(foreground) and not _running(background):
            break
        await asyncio.sleep(0.01)
    assert _running(foreground) == [] and _running(background) == []


async def test_bash_timeout_is_capped_by_the_setting(ws: Workspace) -> None:
    registry = make_registry(bash_timeout_seconds=0.3)
    result = await call(ws, "Bash", registry=registry, command="sleep 5", timeout_seconds=60)
    assert result.is_error and "Timed out after 0.3 seconds" in result.content


async def test_bash_large_output_is_cut_with_a_narrowing_note(ws: Workspace) -> None:
    result = await call(ws, "Bash", command="seq 1 200000", result_tokens=2000)
    assert not result.is_error
    assert len(result.content) <= 2000 * CHARS_PER_TOKEN
    lines = result.content.splitlines()
    assert lines[0] == "1"
    assert lines[-1] == "[Exit code: 0]"
    assert "200000" in result.content  # the tail is kept
    assert TRUNCATION_MARKER in result.content
    for word in ("head", "tail", "grep"):
        assert word in result.content


async def test_bash_runaway_output_is_bounded(ws: Workspace) -> None:
    result = await call(ws, "Bash", command="yes | head -c 20000000; echo end")
    assert result.content.endswith("\n[Exit code: 0]")
    assert "y\nend\n" in result.content
    assert len(result.content) <= 60_000 * CHARS_PER_TOKEN


async def test_bash_disabled(ws: Workspace) -> None:
    registry = make_registry(bash_enabled=False)
    result = await call(ws, "Bash", registry=registry, command="true")
    assert result.is_error and "unknown tool" in result.content
