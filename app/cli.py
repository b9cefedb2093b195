"""`strata`: serve, worker, migrate, keys, claude-code install, openapi."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app import settings_errors
from app.settings import (
    Settings,
    configured_variables,
    get_settings,
    is_loopback_host,
    unknown_variables,
)

DEFAULT_OPENAPI_PATH = Path("openapi/openapi.json")
logger = logging.getLogger("strata")
_DURATION = re.compile(r"^(\d{1,9})([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _configure_process(settings: Settings) -> None:
    """Logging, and the metrics folder; before anything that defines a metric is imported."""
    from app.observability.logs import configure_logging
    from app.observability.process import prepare_metrics

    configure_logging(settings)
    prepare_metrics(settings)
    _warn_unknown_variables()


def _warn_unknown_variables() -> None:
    """Name each `STRATA_` variable no setting reads, with the setting it may have meant."""
    env_file = Settings.model_config.get("env_file")
    names = configured_variables(os.environ, Path(str(env_file)) if env_file else None)
    for name, close in unknown_variables(names).items():
        hint = f"; did you mean {close}?" if close else ""
        logger.warning("%s is not a setting of Strata and is ignored%s", name, hint)


async def _keys_exist(settings: Settings) -> bool:
    from app.db.engine import Database
    from app.services.auth import Authenticator

    database = Database(settings)
    try:
        return await Authenticator(settings.configured_keys).keys_exist(database)
    finally:
        await database.dispose()


def _operator_policy_loads(settings: Settings) -> bool:
    """Whether `STRATA_TOOL_POLICY_FILE` (when set) reads as good rules and
    `STRATA_MCP_SERVERS_FILE` as good servers; if not, why is logged and the process is
    not to start: it would run calls the operator meant to hold or refuse, or offer
    servers the operator did not mean."""
    from app.mcp.stdio import ServersFileError
    from app.services.mcp_attach import operator_servers
    from app.services.tool_policy import ToolPolicyFileError
    from app.wiring import builtin_tools, operator_policy

    try:
        operator_policy(settings, builtin_tools(settings))
        operator_servers(settings)
    except (ToolPolicyFileError, ServersFileError) as exc:
        logger.error("refusing to start: %s", exc)
        return False
    return True


def cmd_serve(args: argparse.Namespace) -> int:
    overrides: dict[str, object] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port:
        overrides["port"] = args.port
    settings = get_settings().model_copy(update=overrides)
    _configure_process(settings)  # before the app's modules, which define the metrics

    import uvicorn

    from app.db.migrate import upgrade_to_head
    from app.main import create_app
    from app.observability.gc_tuning import tune_gc

    if not _operator_policy_loads(settings):
        return 2
    upgrade_to_head(settings.database_url)
    has_keys = asyncio.run(_keys_exist(settings))
    if not has_keys and not is_loopback_host(settings.host):
        logger.error(
            "refusing to listen on %s: no API key is configured, so anyone who can reach "
            "this address would have full access. Create one with `strata keys create "
            "--tenant NAME` or set STRATA_API_KEYS, or serve on 127.0.0.1.",
            settings.host,
        )
        return 2
    if not has_keys:
        logger.warning("no API key configured: serving the local tenant on %s only", settings.host)
    if not is_loopback_host(settings.host) and not settings.allowed_host_list:
        logger.warning(
            "listening on %s: a request naming this server otherwise than localhost, a "
            "loopback address or %s gets 403 host-not-allowed; list its public names in "
            "STRATA_ALLOWED_HOSTS",
            settings.host,
            settings.host,
        )
    application = create_app(settings)
    tune_gc(settings)
    uvicorn.run(application, host=settings.host, port=settings.port, log_config=None)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """A runner in its own process; run as many as the database can feed."""
    settings = get_settings()
    _configure_process(settings)  # before the runtime's modules, which define the metrics

    import signal

    from app.db.migrate import upgrade_to_head
    from app.observability.gc_tuning import tune_gc
    from app.wiring import runtime

    if not _operator_policy_loads(settings):
        return 2
    upgrade_to_head(settings.database_url)

    async def work() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with runtime(settings, with_runner=True):
            tune_gc(settings)
            await stop.wait()

    asyncio.run(work())
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """What serve and worker do first, alone: for a deployment that migrates in its own step."""
    from app.db.migrate import head_revision, upgrade_to_head

    settings = get_settings()
    _configure_process(settings)
    upgrade_to_head(settings.database_url)
    print(f"the database is at migration {head_revision()}", file=sys.stderr)
    return 0


def _parse_duration(text: str) -> timedelta:
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90d, 12h, 30m")
    return timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])


def _with_database(work: Any) -> Any:
    """Runs `work(database)` on the migrated database of the settings, then closes it."""
    from app.db.engine import Database
    from app.db.migrate import upgrade_to_head

    settings = get_settings()
    upgrade_to_head(settings.database_url)

    async def run() -> Any:
        database = Database(settings)
        try:
            return await work(database)
        finally:
            await database.dispose()

    return asyncio.run(run())


def cmd_keys_create(args: argparse.Namespace) -> int:
    from app.db.engine import Database
    from app.db.types import utcnow
    from app.domain.errors import DomainError
    from app.services.auth import create_key

    expires_at: datetime | None = utcnow() + args.expires_in if args.expires_in else None

    async def create(database: Database) -> tuple[str, str]:
        row, key = await database.write(
            lambda db: create_key(db, args.tenant, expires_at=expires_at)
        )
        return row.id, key

    try:
        key_id, key = _with_database(create)
    except DomainError as exc:
        print(f"strata keys create: {exc.detail}", file=sys.stderr)
        return 2
    until = f", valid until {expires_at.isoformat(timespec='seconds')}" if expires_at else ""
    print(
        f"created {key_id} for tenant {args.tenant!r}{until}; the key is shown only now:",
        file=sys.stderr,
    )
    print(key)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    """One line per key stored in the database (keys from STRATA_API_KEYS are not listed)."""
    from app.db.engine import Database
    from app.db.types import utcnow
    from app.services.auth import list_keys

    async def read(database: Database) -> list[Any]:
        async with database.read() as db:
            return await list_keys(db)

    rows = _with_database(read)
    now = utcnow()
    print("id\ttenant\tprefix\tcreated\texpires\tstate")
    for row in rows:
        state = (
            "revoked"
            if row.revoked_at is not None
            else "expired"
            if row.expires_at is not None and row.expires_at <= now
            else "active"
        )
        expires = row.expires_at.isoformat(timespec="seconds") if row.expires_at else "never"
        created = row.created_at.isoformat(timespec="seconds")
        print(f"{row.id}\t{row.tenant}\t{row.prefix}…\t{created}\t{expires}\t{state}")
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from app.db.engine import Database
    from app.domain.errors import DomainError
    from app.services.auth import Revocation, revoke_key

    configured = {key.tenant for key in get_settings().configured_keys}

    async def revoke(database: Database) -> Revocation:
        return await database.write(
            lambda db: revoke_key(db, args.key_id, configured_tenants=configured)
        )

    try:
        done: Revocation = _with_database(revoke)
    except DomainError as exc:
        print(f"strata keys revoke: {exc.detail}", file=sys.stderr)
        return 2
    print(
        f"revoked {args.key_id}: refused at once here, by running servers within "
        "STRATA_API_KEY_CACHE_SECONDS (their open event streams end within "
        "STRATA_SSE_KEY_CHECK_SECONDS more)",
        file=sys.stderr,
    )
    if done.webhooks_disabled:
        print(
            f"tenant {done.key.tenant!r} has no valid key left: its {done.webhooks_disabled} "
            "enabled webhook subscription(s) are disabled; a new key of the tenant can enable "
            "them again (PATCH /webhooks/{id} with enabled: true)",
            file=sys.stderr,
        )
    return 0


def cmd_openapi(args: argparse.Namespace) -> int:
    from app.main import create_app

    document = json.dumps(create_app(Settings()).openapi(), indent=2, ensure_ascii=False) + "\n"
    if args.output == "-":
        sys.stdout.write(document)
    else:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document, encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_claude_code_install(args: argparse.Namespace) -> int:
    from app.claude_code_install import InstallError, apply, claude_dir, plan_install

    api_key = sys.stdin.readline().strip() if args.api_key == "-" else args.api_key
    try:
        target = claude_dir(user=args.user, project=args.project)
        plan = plan_install(
            target, url=args.url, api_key=api_key or None, project=args.project is not None
        )
    except InstallError as exc:
        print(f"strata claude-code install: {exc}", file=sys.stderr)
        return 2
    verb = "would change" if args.dry_run else "changed"
    if not plan.changes:
        print(f"{target}: the Strata kit is installed already; nothing to change")
    else:
        print(f"{target}: {verb}:")
        for change in plan.changes:
            print(f"  {change}")
    if not args.dry_run:
        apply(plan)
    print("where everything is:")
    for line in plan.where:
        print(f"  {line}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strata", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="apply migrations, then serve the API")
    serve.add_argument("--host", help="address to bind (default STRATA_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default $PORT or 8000)")
    serve.set_defaults(func=cmd_serve)

    worker = commands.add_parser("worker", help="run the background job runner")
    worker.set_defaults(func=cmd_worker)

    migrate = commands.add_parser("migrate", help="apply the database migrations and exit")
    migrate.set_defaults(func=cmd_migrate)

    keys = commands.add_parser("keys", help="manage API keys")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="create a key for a tenant (printed once)")
    create.add_argument("--tenant", required=True)
    create.add_argument(
        "--expires-in", type=_parse_duration, help="refuse the key after this long (90d, 12h, 30m)"
    )
    create.set_defaults(func=cmd_keys_create)
    listing = key_commands.add_parser("list", help="the stored keys (never the keys themselves)")
    listing.set_defaults(func=cmd_keys_list)
    revoke = key_commands.add_parser("revoke", help="refuse a key from now on")
    revoke.add_argument("key_id", help="the key's id, as `strata keys list` shows it")
    revoke.set_defaults(func=cmd_keys_revoke)

    claude_code = commands.add_parser("claude-code", help="connect Claude Code to Strata")
    cc_commands = claude_code.add_subparsers(dest="claude_code_command", required=True)
    install = cc_commands.add_parser(
        "install",
        help="merge the kit's hooks and /sc-detail into Claude Code's settings",
        description=(
            "Installs the hook script and the /sc-detail command and merges the hooks into "
            "settings.json, keeping every other setting and hook; for --project, the URL and "
            "the key go into .claude/settings.local.json (personal, 0600) and the shared "
            "files name no machine path. Prints what it changes and where everything is."
        ),
    )
    where = install.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--user",
        action="store_true",
        help="into ~/.claude, or $CLAUDE_CONFIG_DIR when set (every project)",
    )
    where.add_argument("--project", type=Path, metavar="DIR", help="into DIR/.claude")
    install.add_argument("--url", help="the Strata server (default: kept, else 127.0.0.1:8000)")
    install.add_argument(
        "--api-key",
        help="the key, if the server has keys (`-`: read it from stdin, out of the shell "
        "history); it goes into a file readable by you only, never a project's shared one",
    )
    install.add_argument("--dry-run", action="store_true", help="print the changes only")
    install.set_defaults(func=cmd_claude_code_install)

    openapi = commands.add_parser("openapi", help="export the OpenAPI document")
    openapi.add_argument("--output", "-o", default=str(DEFAULT_OPENAPI_PATH), help="path or -")
    openapi.set_defaults(func=cmd_openapi)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs a command; a setting whose value is refused ends it with exit status 2 and a line
    per refused value on stderr (the variable, the value, why), not a traceback."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ValidationError as error:
        if error.title != Settings.__name__:
            raise
        print("strata: a setting has a value Strata cannot use:", file=sys.stderr)
        for line in settings_errors.describe(error):
            print(f"  {line}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
