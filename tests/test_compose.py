"""compose.yaml runs PostgreSQL, one API process and two workers from the Dockerfile's image.

No container engine runs here, so this reads the file: its services, what each runs, how
they reach the database, and that every variable it sets is one Strata knows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    assert isinstance(services, dict)
    return services


def _strata_services() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in _services().items() if name != "postgres"}


def _known_variables() -> set[str]:
    names: set[str] = set()
    for field_name, field in Settings.model_fields.items():
        choices = getattr(field.validation_alias, "choices", None)
        names.update(str(c) for c in choices or [f"STRATA_{field_name.upper()}"])
    return names


def test_postgres_is_health_checked_and_kept_in_a_volume() -> None:
    postgres = _services()["postgres"]

    assert postgres["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    assert {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"} <= postgres["environment"].keys()


def test_one_api_and_two_workers_run_strata_from_the_dockerfile() -> None:
    commands = sorted(s["command"][1] for s in _strata_services().values())

    assert commands == ["serve", "worker", "worker"]
    for service in _strata_services().values():
        assert service["build"] == "."
        assert service["command"][0] == "strata"
    assert (ROOT / "Dockerfile").is_file()


def test_every_strata_process_uses_the_compose_database_once_it_is_healthy() -> None:
    postgres = _services()["postgres"]["environment"]
    expected = (
        f"postgresql+psycopg://{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{postgres['POSTGRES_DB']}"
    )

    for service in _strata_services().values():
        assert service["environment"]["STRATA_DATABASE_URL"] == expected
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_api_publishes_its_port_binds_all_interfaces_and_leaves_jobs_to_the_workers() -> None:
    api = _services()["api"]

    assert api["ports"] == ["8000:8000"]
    assert api["environment"]["STRATA_HOST"] == "0.0.0.0"
    assert api["environment"]["STRATA_RUN_WORKER_IN_SERVER"] == "false"
    assert api["environment"]["STRATA_API_KEYS"].startswith("${STRATA_API_KEYS:?")


def test_workers_share_the_data_volume_and_have_no_http_health_check() -> None:
    for name, service in _strata_services().items():
        assert "strata-data:/data" in service["volumes"], name
        if service["command"][1] == "worker":
            assert service["healthcheck"] == {"disable": True}
    assert {"postgres-data", "strata-data"} <= _compose()["volumes"].keys()


def test_every_variable_set_for_strata_is_a_setting() -> None:
    known = _known_variables()

    for name, service in _strata_services().items():
        unknown = sorted(set(service["environment"]) - known)
        assert unknown == [], f"{name} sets {unknown}"
