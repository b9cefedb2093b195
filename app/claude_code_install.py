"""`strata claude-code install`: the Claude Code kit into a user's or a project's settings.

The kit (`integrations/claude-code/` of the repository, copied into the package as
`app/integrations/claude-code/` in a built wheel) is a Claude Code plugin:
`.claude-plugin/plugin.json`, `hooks/hooks.json`, `commands/sc-detail.md` and the hook script.
Users of plugins load it as one; this installs the same hooks and command into plain settings
instead: the script goes to `<.claude>/strata/strata-hook.py`, the command to
`<.claude>/commands/sc-detail.md`, and the kit's hooks are merged into
`<.claude>/settings.json`, where `${CLAUDE_PLUGIN_ROOT}` becomes the installed folder.

Merging never clobbers: other hooks, other settings and other `env` entries stay as they are;
a Strata hook already there (any command running `strata-hook.py`, an older install's
included) is replaced by the current one, so installing twice changes nothing. Every change
is reported, and `dry_run` reports without writing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGED_KIT = Path(__file__).resolve().parent / "integrations" / "claude-code"
SOURCE_KIT = Path(__file__).resolve().parent.parent / "integrations" / "claude-code"
SCRIPT = "strata-hook.py"
PLUGIN_ROOT = "${CLAUDE_PLUGIN_ROOT}"
DEFAULT_URL = "http://127.0.0.1:8000"


class InstallError(Exception):
    """The kit or the settings cannot be used; the message says why."""


@dataclass
class Plan:
    """What an install writes, and the lines describing each change."""

    files: dict[Path, str] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)


def claude_dir(*, user: bool, project: Path | None, home: Path | None = None) -> Path:
    """`~/.claude` for `--user`, `<project>/.claude` for `--project DIR`."""
    if user == (project is not None):
        raise InstallError("choose one: --user or --project DIR")
    if project is not None:
        if not project.is_dir():
            raise InstallError(f"{project} is not a folder")
        return project.resolve() / ".claude"
    return (home or Path.home()) / ".claude"


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
    settings: dict[str, Any], kit_hooks: dict[str, Any], changes: list[str]
) -> dict[str, Any]:
    """`settings` with the kit's hook groups in place of any Strata hooks it had."""
    merged = dict(settings)
    hooks = dict(merged.get("hooks") or {})
    for event, groups in kit_hooks.items():
        existing = hooks.get(event) or []
        if not isinstance(existing, list):
            raise InstallError(f"settings.json: hooks.{event} is not a list")
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
        for command in removed:
            changes.append(f"settings.json: - hooks.{event}: {command}")
        for command in wanted:
            changes.append(f"settings.json: + hooks.{event}: {command}")
    merged["hooks"] = hooks
    return merged


def merge_env(
    settings: dict[str, Any], wanted: dict[str, str | None], changes: list[str]
) -> dict[str, Any]:
    """Set the given env entries; an entry given as None is only set when absent (to its
    default), so a URL or key already configured stays."""
    merged = dict(settings)
    env = dict(merged.get("env") or {})
    for name, value in wanted.items():
        if value is None:
            continue
        if env.get(name) != value:
            shown = "(hidden)" if "KEY" in name else value
            changes.append(f"settings.json: env.{name} = {shown}")
            env[name] = value
    merged["env"] = env
    return merged


def plan_install(target: Path, *, url: str | None = None, api_key: str | None = None) -> Plan:
    """Everything an install into `target` (a `.claude` folder) would write."""
    plan = Plan()
    script_dir = target / "strata"
    script = script_dir / SCRIPT
    root = str(script_dir)
    kit_root = f"{PLUGIN_ROOT}/scripts"
    files = {
        script: _kit_file(f"scripts/{SCRIPT}"),
        target / "commands" / "sc-detail.md": _kit_file("commands/sc-detail.md").replace(
            kit_root, root
        ),
    }
    for path, text in files.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            plan.files[path] = text
            plan.changes.append(f"write {path}")
    kit_hooks = json.loads(_kit_file("hooks/hooks.json").replace(kit_root, root))["hooks"]
    settings_path = target / "settings.json"
    current: dict[str, Any] = {}
    if settings_path.is_file():
        try:
            loaded = json.loads(settings_path.read_text(encoding="utf-8") or "{}")
        except ValueError as exc:
            raise InstallError(f"{settings_path} is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise InstallError(f"{settings_path} is not a JSON object")
        current = loaded
    env_now = current.get("env") or {}
    wanted = {
        "STRATA_URL": url or (None if "STRATA_URL" in env_now else DEFAULT_URL),
        "STRATA_API_KEY": api_key,
    }
    merged = merge_env(merge_hooks(current, kit_hooks, plan.changes), wanted, plan.changes)
    if merged != current:
        plan.files[settings_path] = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    return plan


def apply(plan: Plan) -> None:
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if path.name == SCRIPT:
            path.chmod(0o755)
