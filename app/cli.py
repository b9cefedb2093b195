"""`strata`: serve, worker, keys, claude-code install, openapi."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from app.settings import Settings, get_settings, is_loopback_host

DEFAULT_OPENAPI_PATH = Path("openapi/openapi.json")


def _configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def _keys_exist(settings: Settings) -> bool:
    from app.db.engine import Database
    from app.services.auth import Authenticator

    database = Database(settings)
    try:
        return await Authenticator(settings.configured_keys).keys_exist(database)
    finally:
        await database.dispose()


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.db.migrate import upgrade_to_head
    from app.main import create_app

    overrides: dict[str, object] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port:
        overrides["port"] = args.port
    settings = get_settings().model_copy(update=overrides)
    _configure_logging(settings)
    upgrade_to_head(settings.database_url)
    has_keys = asyncio.run(_keys_exist(settings))
    if not has_keys and not is_loopback_host(settings.host):
        print(
            f"strata: refusing to listen on {settings.host}: no API key is configured, so "
            "anyone who can reach this address would have full access.\n"
            "Create one with `strata keys create --tenant NAME` or set STRATA_API_KEYS, "
            "or serve on 127.0.0.1.",
            file=sys.stderr,
        )
        return 2
    if not has_keys:
        print(
            f"strata: no API key configured: serving the local tenant on {settings.host} only",
            file=sys.stderr,
        )
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """A runner in its own process; run as many as the database can feed."""
    import signal

    from app.db.migrate import upgrade_to_head
    from app.wiring import runtime

    settings = get_settings()
    _configure_logging(settings)
    upgrade_to_head(settings.database_url)

    async def work() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with runtime(settings, with_runner=True):
            await stop.wait()

    asyncio.run(work())
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    from app.db.engine import Database
    from app.db.migrate import upgrade_to_head
    from app.domain.errors import DomainError
    from app.services.auth import create_key

    settings = get_settings()
    upgrade_to_head(settings.database_url)

    async def create() -> tuple[str, str]:
        database = Database(settings)
        try:
            row, key = await database.write(lambda db: create_key(db, args.tenant))
            return row.id, key
        finally:
            await database.dispose()

    try:
        key_id, key = asyncio.run(create())
    except DomainError as exc:
        print(f"strata keys create: {exc.detail}", file=sys.stderr)
        return 2
    print(
        f"created {key_id} for tenant {args.tenant!r}; the key is shown only now:", file=sys.stderr
    )
    print(key)
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

    try:
        target = claude_dir(user=args.user, project=args.project)
        plan = plan_install(target, url=args.url, api_key=args.api_key)
    except InstallError as exc:
        print(f"strata claude-code install: {exc}", file=sys.stderr)
        return 2
    verb = "would change" if args.dry_run else "changed"
    if not plan.changes:
        print(f"{target}: the Strata kit is installed already; nothing to change")
        return 0
    print(f"{target}: {verb}:")
    for change in plan.changes:
        print(f"  {change}")
    if not args.dry_run:
        apply(plan)
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

    keys = commands.add_parser("keys", help="manage API keys")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="create a key for a tenant (printed once)")
    create.add_argument("--tenant", required=True)
    create.set_defaults(func=cmd_keys_create)

    claude_code = commands.add_parser("claude-code", help="connect Claude Code to Strata")
    cc_commands = claude_code.add_subparsers(dest="claude_code_command", required=True)
    install = cc_commands.add_parser(
        "install",
        help="merge the kit's hooks and /sc-detail into Claude Code's settings",
        description=(
            "Installs the hook script and the /sc-detail command and merges the hooks into "
            "settings.json, keeping every other setting and hook; prints what it changes."
        ),
    )
    where = install.add_mutually_exclusive_group(required=True)
    where.add_argument("--user", action="store_true", help="into ~/.claude (every project)")
    where.add_argument("--project", type=Path, metavar="DIR", help="into DIR/.claude")
    install.add_argument("--url", help="the Strata server (default: kept, else 127.0.0.1:8000)")
    install.add_argument("--api-key", help="the key, if the server has keys")
    install.add_argument("--dry-run", action="store_true", help="print the changes only")
    install.set_defaults(func=cmd_claude_code_install)

    openapi = commands.add_parser("openapi", help="export the OpenAPI document")
    openapi.add_argument("--output", "-o", default=str(DEFAULT_OPENAPI_PATH), help="path or -")
    openapi.set_defaults(func=cmd_openapi)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
