"""`strata claude-code install`: the Claude Code kit into a user's or a project's settings.

The kit (`integrations/claude-code/` of the repository, copied into the package as
`app/integrations/claude-code/` in a built wheel) is a Claude Code plugin:
`.claude-plugin/plugin.json`, `hooks/hooks.json`, `commands/sc-detail.md`, `.mcp.json` (Strata's
MCP server at `$STRATA_URL/mcp`) and the hook script. Users of plugins load it as one; this
installs the same hooks, command and MCP server into plain settings instead: the script goes to
`<.claude>/strata/strata-hook.py`, the command to `<.claude>/commands/sc-detail.md`, and the
kit's hooks are merged into `<.claude>/settings.json`, where `${CLAUDE_PLUGIN_ROOT}/scripts`
becomes the installed folder.

No file holding the MCP server entry holds a key. The user's entry is the plugin's own: its
URL and its `Authorization` header are `${STRATA_URL}` and `${STRATA_API_KEY}`, which Claude
Code expands from its environment, the `env` of `~/.claude/settings.json` included. A
project's `.mcp.json` is expanded from Claude Code's own environment only, never from the
personal `settings.local.json`: its URL is the install's (`${STRATA_URL:-URL}`) and its
header comes from a `headersHelper`, the installed script's `mcp-headers`, which reads the key
from `STRATA_API_KEY` or `settings.local.json`.

What goes where depends on who reads the file:

- `--user` (`~/.claude`, or `$CLAUDE_CONFIG_DIR` when set, as Claude Code reads it): every
  file is the user's own. The hooks and the command name the script by its path, and
  `STRATA_URL` / `STRATA_API_KEY` go into the `env` of `settings.json`, which is made
  readable by its owner only (0600) once it holds a key. The MCP server goes into
  `mcpServers` of `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`), where `claude mcp
  add --scope user` puts it.
- `--project DIR`: `DIR/.claude/settings.json`, the script and the command are the
  project's, the files a team commits, so they hold nothing of one person or machine: the
  hooks run `"$CLAUDE_PROJECT_DIR/.claude/strata/strata-hook.py"` (Claude Code sets the
  variable for hooks) and the command `.claude/strata/strata-hook.py` (a command's shell
  line runs in the project folder, and Claude Code asks before running one that expands a
  variable). `STRATA_URL` and `STRATA_API_KEY` go into `DIR/.claude/settings.local.json`
  (Claude Code's personal project settings, 0600); a key an earlier install left in
  `settings.json` is moved there, and a `STRATA_URL` the project's file has already is the
  team's and stays. The MCP server goes into the project's `DIR/.mcp.json` (shared, as
  `claude mcp add --scope project` does) and its approval, `enabledMcpjsonServers`, into
  `settings.local.json`, as Claude Code's own prompt records a yes.

Merging never clobbers: other hooks, other settings and other `env` entries stay as they are;
a Strata hook already there (any command running `strata-hook.py`, an older install's
included) is replaced by the current one, so installing twice changes nothing. Every change
is reported (a key as `(hidden)`, never itself), and `dry_run` reports without writing.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGED_KIT = Path(__file__).resolve().parent / "integrations" / "claude-code"
SOURCE_KIT = Path(__file__).resolve().parent.parent / "integrations" / "claude-code"
SCRIPT = "strata-hook.py"
KIT_SCRIPTS = "${CLAUDE_PLUGIN_ROOT}/scripts"
CONFIG_DIR_VARIABLE = "CLAUDE_CONFIG_DIR"  # where Claude Code keeps its user files, if set
PROJECT_HOOKS_ROOT = "$CLAUDE_PROJECT_DIR/.claude/strata"
PROJECT_COMMAND_ROOT = ".claude/strata"
DEFAULT_URL = "http://127.0.0.1:8000"
KEY = "STRATA_API_KEY"
MCP_NAME = "strata"  # the server's name in Claude Code: its tools are mcp__strata__<tool>
APPROVED = "enabledMcpjsonServers"
# the server's read-only tools, allowed without asking (its opt-in write tools still ask)
READ_TOOLS = tuple(
    f"mcp__{MCP_NAME}__{tool}"
    for tool in ("memory_search", "memory_timeline", "memory_detail", "tasks_list", "task_get")
)
PRIVATE = 0o600


class InstallError(Exception):
    """The kit or the settings cannot be used; the message says why."""


@dataclass
class Plan:
    """What an install writes (and makes private), the lines describing each change, and
    where everything went."""

    files: dict[Path, str] = field(default_factory=dict)
    private: set[Path] = field(default_factory=set)  # written (or set) 0600
    changes: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)


def claude_dir(*, user: bool, project: Path | None, home: Path | None = None) -> Path:
    """`<project>/.claude` for `--project DIR`; for `--user`, Claude Code's own configuration
    folder: `$CLAUDE_CONFIG_DIR` when set, as Claude Code reads it, else `~/.claude`."""
    if user == (project is not None):
        raise InstallError("choose one: --user or --project DIR")
    if project is not None:
        if not project.is_dir():
            raise InstallError(f"{project} is not a folder")
        return project.resolve() / ".claude"
    configured = os.environ.get(CONFIG_DIR_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    return (home or Path.home()) / ".claude"


def user_config_file(target: Path) -> Path:
    """Claude Code's user configuration (`mcpServers` of `claude mcp add --scope user`):
    `.claude.json` inside `$CLAUDE_CONFIG_DIR` when that names `target`, else beside the
    `.claude` folder (`~/.claude.json`)."""
    configured = os.environ.get(CONFIG_DIR_VARIABLE)
    if configured and Path(configured).expanduser() == target:
        return target / ".claude.json"
    return target.parent / ".claude.json"


def kit_dir() -> Path:
    """The installed package's copy of the kit, else the source tree's."""
    for candidate in (PACKAGED_KIT, SOURCE_KIT):
        if (candidate / "scripts" / SCRIPT).is_file():
            return candidate
    raise InstallError(
        f"the Claude Code kit is missing (looked in {PACKAGED_KIT} and {SOURCE_KIT}): "
        "reinstall Strata"
    )


def _kit_file(relative: str) -> str:
    path = kit_dir() / relative
    if not path.is_file():
        raise InstallError(f"the Claude Code kit is missing {path}: reinstall Strata")
    return path.read_text(encoding="utf-8")


def _ours(handler: object) -> bool:
    return isinstance(handler, dict) and SCRIPT in str(handler.get("command", ""))


def merge_hooks(
    settings: dict[str, Any], kit_hooks: dict[str, Any], changes: list[str], label: str
) -> dict[str, Any]:
    """`settings` with the kit's hook groups in place of any Strata hooks it had."""
    merged = dict(settings)
    hooks = dict(merged.get("hooks") or {})
    for event, groups in kit_hooks.items():
        existing = hooks.get(event) or []
        if not isinstance(existing, list):
            raise InstallError(f"{label}: hooks.{event} is not a list")
        kept: list[Any] = []
        removed: list[str] = []
        for group in existing:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                kept.append(group)
                continue
            removed += [str(h.get("command")) for h in handlers if _ours(h)]
            others = [h for h in handlers if not _ours(h)]
            if others:
                kept.append({**group, "hooks": others})
        wanted = [str(h["command"]) for g in groups for h in g["hooks"]]
        if kept + groups == existing:
            continue  # already installed as it is
        hooks[event] = kept + groups
        changes += [f"{label}: - hooks.{event}: {command}" for command in removed]
        changes += [f"{label}: + hooks.{event}: {command}" for command in wanted]
    merged["hooks"] = hooks
    return merged


def merge_env(
    settings: dict[str, Any], wanted: dict[str, str | None], changes: list[str], label: str
) -> dict[str, Any]:
    """Set the given env entries (an entry given as None is left as it is)."""
    merged = dict(settings)
    env = dict(merged.get("env") or {})
    for name, value in wanted.items():
        if value is not None and env.get(name) != value:
            changes.append(f"{label}: env.{name} = {'(hidden)' if name == KEY else value}")
            env[name] = value
    if env or "env" in merged:
        merged["env"] = env
    return merged


def _read_settings(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(loaded, dict):
        raise InstallError(f"{path} is not a JSON object")
    return loaded


def _env_of(settings: dict[str, Any]) -> dict[str, Any]:
    env = settings.get("env") or {}
    return env if isinstance(env, dict) else {}


def _stage(plan: Plan, path: Path, before: dict[str, Any], after: dict[str, Any]) -> None:
    if after != before:
        plan.files[path] = json.dumps(after, indent=2, ensure_ascii=False) + "\n"


def _keep_private(plan: Plan, path: Path, holds_key: bool) -> None:
    """A settings file holding the key is readable by its owner only."""
    if not holds_key:
        return
    plan.private.add(path)
    if path.is_file() and path.stat().st_mode & 0o777 != PRIVATE and path not in plan.files:
        plan.changes.append(f"{path.name}: mode 0600 (it holds {KEY})")


def _kit_files(plan: Plan, target: Path, command_root: str) -> None:
    files = {
        target / "strata" / SCRIPT: _kit_file(f"scripts/{SCRIPT}"),
        target / "commands" / "sc-detail.md": _kit_file("commands/sc-detail.md").replace(
            KIT_SCRIPTS, command_root
        ),
    }
    for path, text in files.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            plan.files[path] = text
            plan.changes.append(f"write {path}")


def _kit_hooks(hooks_root: str) -> dict[str, Any]:
    kit: dict[str, dict[str, Any]] = json.loads(
        _kit_file("hooks/hooks.json").replace(KIT_SCRIPTS, hooks_root)
    )
    return kit["hooks"]


def _kit_mcp_server() -> dict[str, Any]:
    """The MCP server entry of the plugin's `.mcp.json`."""
    try:
        servers = json.loads(_kit_file(".mcp.json"))["mcpServers"]
        server: dict[str, Any] = servers[MCP_NAME]
    except (ValueError, KeyError, TypeError) as exc:
        raise InstallError(f"the kit's .mcp.json names no {MCP_NAME}: reinstall Strata") from exc
    return server


def project_mcp_server(url: str) -> dict[str, Any]:
    """The MCP server entry of a project's `.mcp.json`. Claude Code expands it from its own
    environment only, not from the personal settings.local.json: so the URL is the
    install's (an exported STRATA_URL still wins) and the key comes from the installed
    script, which reads it from settings.local.json (`headersHelper`; the file holds no key)."""
    return {
        "type": "http",
        "url": f"${{STRATA_URL:-{url}}}/mcp",
        "headersHelper": f'python3 "{PROJECT_COMMAND_ROOT}/{SCRIPT}" mcp-headers',
    }


def merge_mcp_server(
    config: dict[str, Any], changes: list[str], label: str, wanted: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`config` with the kit's MCP server (or `wanted`) as `mcpServers.strata` (other
    servers kept)."""
    servers = config.get("mcpServers") or {}
    if not isinstance(servers, dict):
        raise InstallError(f"{label}: mcpServers is not an object")
    wanted = wanted or _kit_mcp_server()
    if servers.get(MCP_NAME) == wanted:
        return config
    changes.append(f"{label}: {'~' if MCP_NAME in servers else '+'} mcpServers.{MCP_NAME}: "
                   f"{wanted['type']} {wanted['url']}")  # fmt: skip
    return {**config, "mcpServers": {**servers, MCP_NAME: wanted}}


def _approve(settings: dict[str, Any], changes: list[str], label: str) -> dict[str, Any]:
    """`settings` approving the project's `.mcp.json` server `strata`."""
    approved = settings.get(APPROVED) or []
    if not isinstance(approved, list):
        raise InstallError(f"{label}: {APPROVED} is not a list")
    if MCP_NAME in approved:
        return settings
    changes.append(f"{label}: + {APPROVED}: {MCP_NAME}")
    return {**settings, APPROVED: [*approved, MCP_NAME]}


def allow_read_tools(settings: dict[str, Any], changes: list[str], label: str) -> dict[str, Any]:
    """`settings` whose `permissions.allow` holds the MCP server's read-only tools."""
    permissions = settings.get("permissions") or {}
    allowed = permissions.get("allow") or [] if isinstance(permissions, dict) else None
    if not isinstance(allowed, list):
        raise InstallError(f"{label}: permissions.allow is not a list")
    missing = [tool for tool in READ_TOOLS if tool not in allowed]
    if not missing:
        return settings
    changes += [f"{label}: + permissions.allow: {tool}" for tool in missing]
    return {**settings, "permissions": {**permissions, "allow": [*allowed, *missing]}}


def plan_install(
    target: Path, *, url: str | None = None, api_key: str | None = None, project: bool = False
) -> Plan:
    """Everything an install into `target` (a `.claude` folder) would write; `project`:
    a project's folder, whose `settings.json` a team shares."""
    if project:
        return _plan_project(target, url, api_key)
    return _plan_user(target, url, api_key)


def _plan_user(target: Path, url: str | None, api_key: str | None) -> Plan:
    plan = Plan()
    root = str(target / "strata")
    _kit_files(plan, target, root)
    path = target / "settings.json"
    current = _read_settings(path)
    kept_url = None if "STRATA_URL" in _env_of(current) else DEFAULT_URL
    merged = merge_hooks(current, _kit_hooks(root), plan.changes, path.name)
    merged = merge_env(
        merged, {"STRATA_URL": url or kept_url, KEY: api_key}, plan.changes, path.name
    )
    merged = allow_read_tools(merged, plan.changes, path.name)
    _stage(plan, path, current, merged)
    _keep_private(plan, path, KEY in _env_of(merged))
    config_path = user_config_file(target)
    config = _read_settings(config_path)
    _stage(plan, config_path, config, merge_mcp_server(config, plan.changes, config_path.name))
    plan.where = [
        f"{target / 'strata' / SCRIPT}: the hook script",
        f"{target / 'commands' / 'sc-detail.md'}: /sc-detail",
        f"{path}: the hooks, permissions.allow (the MCP server's read-only tools) and "
        "env.STRATA_URL"
        + (f", env.{KEY} (the file readable by you only)" if KEY in _env_of(merged) else ""),
        f"{config_path}: mcpServers.{MCP_NAME}, Strata's MCP server at $STRATA_URL/mcp "
        f"with the key of ${KEY} (the file names the variables, never the key)",
    ]
    if KEY not in _env_of(merged):
        plan.where.append(
            f"no API key written: if the server has keys, run again with `--api-key -` (the "
            f"key goes to {path.name}, readable by you only) or export {KEY}"
        )
    return plan


def _plan_project(target: Path, url: str | None, api_key: str | None) -> Plan:
    plan = Plan()
    _kit_files(plan, target, PROJECT_COMMAND_ROOT)
    shared_path, local_path = target / "settings.json", target / "settings.local.json"
    shared, local = _read_settings(shared_path), _read_settings(local_path)
    merged = merge_hooks(shared, _kit_hooks(PROJECT_HOOKS_ROOT), plan.changes, shared_path.name)
    merged = allow_read_tools(merged, plan.changes, shared_path.name)
    left_key = _env_of(merged).get(KEY)
    if left_key is not None:  # an earlier install's: personal, out of the shared file
        merged = {**merged, "env": {k: v for k, v in _env_of(merged).items() if k != KEY}}
        plan.changes.append(
            f"{shared_path.name}: - env.{KEY} (moved to {local_path.name}; if "
            f"{shared_path.name} was ever committed, revoke that key and install a new one)"
        )
    has_url = "STRATA_URL" in _env_of(shared) or "STRATA_URL" in _env_of(local)
    wanted: dict[str, str | None] = {
        "STRATA_URL": url or (None if has_url else DEFAULT_URL),
        KEY: api_key or (str(left_key) if left_key is not None else None),
    }
    personal = merge_env(local, wanted, plan.changes, local_path.name)
    personal = _approve(personal, plan.changes, local_path.name)
    mcp_path = target.parent / ".mcp.json"  # the project's MCP servers, shared
    mcp = _read_settings(mcp_path)
    _stage(plan, shared_path, shared, merged)
    _stage(plan, local_path, local, personal)
    server_url = str(
        url or _env_of(shared).get("STRATA_URL") or _env_of(local).get("STRATA_URL") or DEFAULT_URL
    )
    server = project_mcp_server(server_url)
    _stage(plan, mcp_path, mcp, merge_mcp_server(mcp, plan.changes, mcp_path.name, server))
    _keep_private(plan, local_path, KEY in _env_of(personal))
    plan.where = _project_where(target, shared_path, local_path, personal)
    return plan


def _project_where(
    target: Path, shared_path: Path, local_path: Path, personal: dict[str, Any]
) -> list[str]:
    names = ", ".join(f"env.{name}" for name in _env_of(personal) if name.startswith("STRATA_"))
    where = [
        f"shared with the project (safe to commit): {shared_path} (the hooks, the MCP "
        "server's read-only tools allowed), "
        f"{target / 'strata' / SCRIPT}, {target / 'commands' / 'sc-detail.md'}, "
        f"{target.parent / '.mcp.json'} (mcpServers.{MCP_NAME}: the server's /mcp, the key "
        f"read by {PROJECT_COMMAND_ROOT}/{SCRIPT} from ${KEY} or {local_path.name}, never "
        "written there)",
        f"personal (never commit it): {local_path}: "
        + (f"{names}, " if names else "")
        + f"{APPROVED} (the MCP server approved)"
        + (" (readable by you only)" if KEY in _env_of(personal) else ""),
    ]
    if KEY not in _env_of(personal):
        where.append(
            f"no API key written: if the server has keys, run again with `--api-key -` (the "
            f"key goes to {local_path.name} only) or export {KEY} before starting Claude Code"
        )
    if not _ignored_by_git(local_path):
        where.append(
            f"{local_path} is in a git work tree and not ignored: add "
            "`.claude/settings.local.json` to the project's .gitignore"
        )
    return where


def _ignored_by_git(path: Path) -> bool:
    """Whether git ignores `path`; True outside a git work tree (or without git)."""
    try:
        inside = subprocess.run(
            ["git", "-C", str(path.parent.parent), "rev-parse", "--is-inside-work-tree"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return True
        ignored = subprocess.run(
            ["git", "-C", str(path.parent.parent), "check-ignore", "-q", str(path)],
            capture_output=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return True
    return ignored.returncode == 0


def apply(plan: Plan) -> None:
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if path in plan.private:
            _write_private(path, text)
        else:
            path.write_text(text, encoding="utf-8")
        if path.name == SCRIPT:
            path.chmod(0o755)
    for path in plan.private - set(plan.files):
        path.chmod(PRIVATE)


def _write_private(path: Path, text: str) -> None:
    """Written 0600 from its first byte: the key is never readable by others, not even
    for a moment."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), PRIVATE)
        out.write(text)
