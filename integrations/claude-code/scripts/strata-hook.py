#!/usr/bin/env python3
"""Claude Code -> Strata, standard library only: the hooks and the /sc-detail command.

As a hook (Claude Code runs it with the hook's JSON payload on stdin):

- SessionStart posts the payload and prints Strata's answer, whose
  `hookSpecificOutput.additionalContext` (the memory of earlier sessions of this project)
  Claude Code adds to the new session. It also exports STRATA_SESSION_ID through
  CLAUDE_ENV_FILE, so /sc-detail knows the session later. It tells Strata how this session
  looks details up, for the block's guide line: `kit_mode` is `plugin` when this script is
  the plugin's (its folder's parent holds .claude-plugin/plugin.json; Claude Code names the
  plugin's command /strata:sc-detail), else `settings` (an installed copy in
  .claude/strata/, the command /sc-detail); `kit_mcp` says whether Claude Code has
  Strata's MCP server `strata` (the plugin's .mcp.json, or the `mcpServers` of
  ~/.claude.json or the project's .mcp.json, where `strata claude-code install` puts it).
- Stop / SubagentStop hand the payload to a detached copy of this script and return at
  once; the copy posts the transcript lines written since the last post (it remembers how
  far it got per transcript file). Claude Code may exit right after its answer (`claude -p`
  does): a detached process is not ended with it, so the last turn still reaches Strata.
  Strata ingests idempotently, so a line sent twice is harmless.

As a command: `strata-hook.py detail <time> [--page N] [--kind KIND] [--grep TEXT]` prints
one page (about 8,000 characters) of the details of the turns at that time, across the
current project's chain, and a closing line on how to read on. /sc-detail runs it with the
arguments on stdin (a quoted here-document), never on a shell line: whatever the user typed,
apostrophes and quotes included, arrives as typed. `--grep` takes the words up to the next
option.

As `strata-hook.py mcp-headers` (a project's `.mcp.json` `headersHelper`): prints the MCP
server's `Authorization` header as JSON, the key from STRATA_API_KEY or the `env` of the
settings.local.json beside this installed copy.

Environment: STRATA_URL (default http://127.0.0.1:8000), STRATA_API_KEY (if the server has
keys), STRATA_HOOK_STATE (default ~/.cache/strata/claude-code), STRATA_DETAIL_MAX_CHARS
(default 8000). The hook never blocks Claude Code: on any failure it says why on stderr and
exits 0.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

MCP_NAME = "strata"  # the MCP server's name in the kit's .mcp.json and the installer's
TIMEOUT_SECONDS = 15
DELIVERY_ATTEMPTS = 3  # a detached delivery tries this often, 2 s then 4 s apart
DETAIL_MAX_CHARS = 8000
CLOSING_RESERVE = 300  # the closing line's room within the detail's budget
KINDS = ("user", "assistant", "tool_input", "tool_output", "system", "image")


# --- talking to Strata ------------------------------------------------------------------


def _base() -> str:
    return os.environ.get("STRATA_URL", "http://127.0.0.1:8000").rstrip("/")


def _request(method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
    headers = {"Accept": "application/json"}
    data = None
    if payload is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(payload).encode()
    key = os.environ.get("STRATA_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(_base() + path, data=data, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        body = response.read()
        return json.loads(body) if body else {}, response.headers


def post(payload: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    answer, headers = _request("POST", "/hooks/claude-code", payload)
    return answer, headers


# --- local state --------------------------------------------------------------------------


def state_root() -> Path:
    return Path(os.environ.get("STRATA_HOOK_STATE", "~/.cache/strata/claude-code")).expanduser()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def state_file(transcript: Path) -> Path:
    return state_root() / f"{_digest(str(transcript.resolve()))}.lines"


def project_root(cwd: str | None) -> str | None:
    """The git root of `cwd` (the nearest folder up holding `.git`), else None."""
    if not cwd:
        return None
    folder = Path(cwd).expanduser()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return None


def remember_session(project: str | None, session_id: str) -> None:
    """The Strata session a project's Claude Code session is: for /sc-detail when the
    environment does not say (CLAUDE_ENV_FILE missing)."""
    if not project:
        return
    path = state_root() / f"{_digest(project)}.session"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(session_id)


def remembered_session(project: str | None) -> str | None:
    if not project:
        return None
    path = state_root() / f"{_digest(project)}.session"
    return path.read_text().strip() or None if path.is_file() else None


def new_lines(transcript: Path) -> tuple[str, int, int]:
    """(text of the lines not sent yet, number of the first, total lines now)."""
    sent = 0
    marker = state_file(transcript)
    if marker.is_file():
        try:
            sent = int(marker.read_text().strip() or 0)
        except ValueError:
            sent = 0
    # Only "\n" ends a JSONL line (JSON strings may hold U+2028 and the like raw); the last
    # piece is "" or a line still being written, which is sent next time.
    lines = transcript.read_text(encoding="utf-8", errors="replace").split("\n")[:-1]
    if sent > len(lines):  # the file was replaced: start over (ingestion is idempotent)
        sent = 0
    return "".join(line + "\n" for line in lines[sent:]), sent + 1, len(lines)


# --- the hooks ----------------------------------------------------------------------------


def _with_project(payload: dict[str, Any]) -> dict[str, Any]:
    root = project_root(payload.get("cwd"))
    return {**payload, "project_root": root} if root else payload


def _has_strata(path: Path, project: str | None = None) -> bool:
    """Whether the Claude Code configuration at `path` registers the MCP server `strata`
    (at its top, or for `project` in ~/.claude.json's per-project part)."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict):
        return False
    scopes = [config]
    if project is not None and isinstance(config.get("projects"), dict):
        scopes.append(config["projects"].get(project) or {})
    return any(
        isinstance(scope, dict)
        and isinstance(scope.get("mcpServers"), dict)
        and MCP_NAME in scope["mcpServers"]
        for scope in scopes
    )


def plugin_root() -> Path | None:
    """The plugin's folder when this script is the plugin's, else None (an installed copy)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / ".claude-plugin" / "plugin.json").is_file() else None


def kit_lookup(payload: dict[str, Any]) -> dict[str, Any]:
    """How this session looks details up: `kit_mode` (`plugin` or `settings`) and `kit_mcp`
    (whether Claude Code has Strata's MCP server)."""
    plugin = plugin_root()
    if plugin is not None:
        return {"kit_mode": "plugin", "kit_mcp": _has_strata(plugin / ".mcp.json")}
    project = os.environ.get("CLAUDE_PROJECT_DIR") or payload.get("cwd")
    home = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home()).expanduser()
    registered = _has_strata(home / ".claude.json", project) or bool(
        project and _has_strata(Path(project) / ".mcp.json")
    )
    return {"kit_mode": "settings", "kit_mcp": registered}


def session_start(payload: dict[str, Any]) -> None:
    answer, headers = post({**_with_project(payload), **kit_lookup(payload)})
    session_id = headers.get("Strata-Session")
    if session_id:
        remember_session(project_root(payload.get("cwd")) or payload.get("cwd"), session_id)
        env_file = os.environ.get("CLAUDE_ENV_FILE")
        if env_file:  # Claude Code sources it before each Bash command of the session
            with open(env_file, "a", encoding="utf-8") as out:
                out.write(f"export STRATA_SESSION_ID={shlex.quote(session_id)}\n")
    print(json.dumps(answer))


def hand_off(payload: dict[str, Any]) -> None:
    """Start a detached copy of this script that delivers the lines, and return."""
    log = state_root() / "delivery.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as errors:
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--deliver"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,  # its own session: not ended when Claude Code exits
            close_fds=True,
        )
    assert child.stdin is not None
    child.stdin.write(json.dumps(payload).encode())
    child.stdin.close()


def deliver(payload: dict[str, Any]) -> None:
    """Post the transcript lines not sent yet (one delivery per transcript at a time)."""
    event = payload.get("hook_event_name")
    path_text = payload.get("agent_transcript_path") if event == "SubagentStop" else None
    path_text = path_text or payload.get("transcript_path")
    if not path_text:
        return
    transcript = Path(str(path_text)).expanduser()
    marker = state_file(transcript)
    marker.parent.mkdir(parents=True, exist_ok=True)
    with open(marker.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text, first, total = new_lines(transcript)
        if not text:
            return
        body = _with_project({**payload, "transcript": text, "transcript_first_line": first})
        for attempt in range(DELIVERY_ATTEMPTS):
            try:
                post(body)
                break
            except (OSError, urllib.error.URLError):
                if attempt == DELIVERY_ATTEMPTS - 1:
                    raise  # the lines stay unsent: the next Stop sends them
                time.sleep(2 * (attempt + 1))
        marker.write_text(str(total))


def hook() -> int:
    payload = json.load(sys.stdin)
    event = payload.get("hook_event_name")
    if event == "SessionStart":
        session_start(payload)
    elif event in ("Stop", "SubagentStop"):
        hand_off(payload)
    return 0


# --- /sc-detail ---------------------------------------------------------------------------


OPTIONS = ("--page", "--kind", "--grep")


def _unquoted(text: str) -> str:
    """`text` without one pair of quotes around it all (`--grep "two words"`)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _parse_detail(text: str) -> tuple[str, dict[str, str]]:
    """The time and the options of arguments as typed; no shell rules: `--page` and `--kind`
    take one word, `--grep` the words up to the next option."""
    words = text.split()
    options: dict[str, str] = {}
    rest: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word in OPTIONS and index + 1 < len(words):
            end = index + 2
            if word == "--grep":
                while end < len(words) and words[end] not in OPTIONS:
                    end += 1
            options[word[2:]] = _unquoted(" ".join(words[index + 1 : end]))
            index = end
            continue
        rest.append(word)
        index += 1
    return " ".join(rest).strip(), options


def _closing(time_ref: str, options: dict[str, str], page: int, pages: int, chars: int) -> str:
    if pages == 0:
        return "— nothing matches these filters; try without `--kind` or `--grep`."
    if page >= pages:
        return f"— page {page} of {pages}: the end of these details."
    others = " ".join(f"--{k} {v}" for k, v in options.items() if k != "page")
    name = "/strata:sc-detail" if plugin_root() is not None else "/sc-detail"
    command = f"{name} {time_ref} {others} --page {page + 1}".replace("  ", " ")
    narrow = (
        ""
        if options.get("kind") or options.get("grep")
        else (
            "; narrow it with `--kind tool_output` (or user, assistant, tool_input, system) "
            "or `--grep TEXT`"
        )
    )
    return (
        f"— page {page} of {pages} ({chars:,} characters in all). Read on with `{command}`{narrow}."
    )


def detail(args: list[str]) -> int:
    """`args` as words (run by hand), else the arguments as typed on stdin (/sc-detail)."""
    if args:
        typed = " ".join(args)
    else:
        typed = "" if sys.stdin.isatty() else sys.stdin.read()
    time_ref, options = _parse_detail(typed)
    if not time_ref:
        print(
            "usage: /sc-detail <time> [--page N] [--kind KIND] [--grep TEXT], a time from "
            "the session memory: 14:23:05, 14:23-14:30 or 2026-04-16 14:23:05"
        )
        return 0
    if options.get("kind") and options["kind"] not in KINDS:
        print(f"--kind is one of {', '.join(KINDS)}")
        return 0
    cwd = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    session_id = os.environ.get("STRATA_SESSION_ID") or remembered_session(project_root(cwd) or cwd)
    if not session_id:
        print(
            "Strata does not know this session yet: its SessionStart hook has not reached "
            "the server (is STRATA_URL right and the server up?)."
        )
        return 0
    budget = int(os.environ.get("STRATA_DETAIL_MAX_CHARS", DETAIL_MAX_CHARS))
    query = dict(options)
    query["max_chars"] = str(max(budget - CLOSING_RESERVE, 1000))
    path = (
        f"/sessions/{urllib.parse.quote(session_id)}/detail/"
        f"{urllib.parse.quote(time_ref, safe='')}?{urllib.parse.urlencode(query)}"
    )
    try:
        found, _ = _request("GET", path)
    except urllib.error.HTTPError as exc:
        try:
            problem = json.loads(exc.read() or b"{}")
        except ValueError:
            problem = {}
        print(f"Strata: {problem.get('detail') or exc.reason}")
        return 0
    except (OSError, urllib.error.URLError) as exc:  # said to whoever reads the output
        print(f"Strata is not reachable at {_base()}: {exc}")
        return 0
    page = int(found.get("page", 1))
    print(found.get("text", ""))
    print(
        _closing(time_ref, options, page, int(found.get("pages", 0)), found.get("total_chars", 0))
    )
    return 0


def mcp_headers() -> int:
    """The MCP server's headers for a project install (its `.mcp.json` `headersHelper`):
    Claude Code expands a project's `.mcp.json` from its own environment only, never from
    the personal `.claude/settings.local.json`, so the key is read here: STRATA_API_KEY, else
    the `env` of the settings.local.json beside this installed copy."""
    key = os.environ.get("STRATA_API_KEY")
    if not key:
        local = Path(__file__).resolve().parent.parent / "settings.local.json"
        try:
            env = json.loads(local.read_text(encoding="utf-8")).get("env") or {}
        except (OSError, ValueError, AttributeError):
            env = {}
        key = env.get("STRATA_API_KEY") if isinstance(env, dict) else None
    print(json.dumps({"Authorization": f"Bearer {key}"} if key else {}))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["mcp-headers"]:
        return mcp_headers()
    if argv[:1] == ["detail"]:
        return detail(argv[1:])
    if argv[:1] == ["--deliver"]:
        deliver(json.load(sys.stdin))
        return 0
    return hook()


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, ValueError, urllib.error.URLError) as exc:
        print(f"strata-hook: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(0)
