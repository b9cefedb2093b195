"""Settings: the seeds' defaults, the environment names, secrets, and `.env.example`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import AliasChoices, SecretStr, ValidationError

from app.settings import (
    ConfiguredKey,
    Settings,
    configured_variables,
    is_loopback_host,
    unknown_variables,
)

ENV_EXAMPLE = Path(__file__).resolve().parents[1] / ".env.example"
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
SECRET = "sk-ant-api03-not-a-real-key-0123456789"


def _accepted_names(field: str) -> set[str]:
    """The environment variables that set `field`."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return {choice for choice in alias.choices if isinstance(choice, str)}
    if isinstance(alias, str):
        return {alias}
    return {f"STRATA_{field}".upper()}


def _example_variables() -> dict[str, str]:
    variables: dict[str, str] = {}
    for number, line in enumerate(ENV_EXAMPLE.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ASSIGNMENT.match(stripped)
        assert match, f".env.example line {number} is neither a comment nor NAME=value: {line!r}"
        name, value = match.groups()
        assert name not in variables, f".env.example sets {name} twice"
        variables[name] = value
    return variables


# --- (a) the seeds' defaults ---------------------------------------------------


def test_seed_defaults() -> None:
    settings = Settings(_env_file=None)

    assert settings.reminder_requests_since_task_write == 8  # N
    assert settings.reminder_requests_between_reminders == 8  # M
    assert settings.memory_l2_window_turns == 20
    assert settings.summary_target_ratio == 0.2
    assert settings.summary_retries == 2
    assert settings.job_comments_in_prompt == 5
    assert settings.job_comment_max_chars == 500
    assert settings.lessons_max_chars == 2000
    assert settings.context_warn_ratio == 0.70
    assert settings.context_prompt_ratio == 0.85
    assert settings.context_force_ratio == 0.95
    assert settings.context_exhausted_ratio == 0.99
    assert settings.tool_result_budget_ratio == 0.5
    assert settings.tool_result_max_tokens == 60_000
    assert settings.tool_result_min_tokens == 1_000
    assert settings.summary_model == "claude-haiku-4-5-20251001"
    assert settings.database_url == "sqlite:///./data/strata.db"
    assert settings.data_dir == Path("./data")
    assert settings.max_body_bytes == 1024 * 1024


def test_defaults_are_safe_without_any_configuration() -> None:
    settings = Settings(_env_file=None)

    assert settings.host == "127.0.0.1"
    assert settings.port == 8000
    assert settings.api_keys == ""
    assert settings.configured_keys == []
    assert settings.anthropic_api_key is None
    assert settings.anthropic_base_url is None
    assert not settings.llm_configured
    assert settings.display_timezone == "UTC"


def test_context_thresholds_are_increasing() -> None:
    settings = Settings(_env_file=None)

    assert (
        0
        < settings.context_warn_ratio
        < settings.context_prompt_ratio
        < settings.context_force_ratio
        < settings.context_exhausted_ratio
        < 1
    )


# --- (b) environment names -----------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("STRATA_DATABASE_URL", "sqlite:////tmp/other.db", "database_url", "sqlite:////tmp/other.db"),
        ("STRATA_DATA_DIR", "/var/lib/strata", "data_dir", Path("/var/lib/strata")),
        ("STRATA_MODEL", "claude-opus-4-1", "model", "claude-opus-4-1"),
        ("STRATA_SUMMARY_MODEL", "claude-3-5-haiku", "summary_model", "claude-3-5-haiku"),
        ("STRATA_API_KEYS", "acme:sk_strata_x", "api_keys", "acme:sk_strata_x"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9999", "anthropic_base_url", "http://127.0.0.1:9999"),
        ("STRATA_ANTHROPIC_BASE_URL", "http://127.0.0.1:9998", "anthropic_base_url", "http://127.0.0.1:9998"),
        ("STRATA_PORT", "9001", "port", 9001),
        ("PORT", "9002", "port", 9002),
        ("STRATA_HOST", "0.0.0.0", "host", "0.0.0.0"),
        ("STRATA_REMINDER_REQUESTS_SINCE_TASK_WRITE", "3", "reminder_requests_since_task_write", 3),
        ("STRATA_CONTEXT_WARN_RATIO", "0.6", "context_warn_ratio", 0.6),
    ],
)  # fmt: skip
def test_environment_variable_is_read(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str, expected: object
) -> None:
    monkeypatch.setenv(variable, value)

    assert getattr(Settings(_env_file=None), field) == expected


@pytest.mark.parametrize("variable", ["ANTHROPIC_API_KEY", "STRATA_ANTHROPIC_API_KEY"])
def test_anthropic_api_key_is_read(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, SECRET)

    settings = Settings(_env_file=None)

    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == SECRET
    assert settings.llm_configured


def test_empty_variables_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """`NAME=` (a copied .env.example, `docker run -e NAME=`) must not configure an empty key."""
    for variable in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "STRATA_PORT", "STRATA_MODEL"):
        monkeypatch.setenv(variable, "")

    settings = Settings(_env_file=None)

    assert settings.anthropic_api_key is None
    assert settings.anthropic_base_url is None
    assert not settings.llm_configured
    assert settings.port == 8000
    assert settings.model == "claude-sonnet-4-5"


def test_env_file_is_read_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("STRATA_MODEL=from-file\nSTRATA_SUMMARY_MODEL=from-file\n", "utf-8")
    monkeypatch.setenv("STRATA_SUMMARY_MODEL", "from-env")

    settings = Settings(_env_file=env_file)

    assert settings.model == "from-file"
    assert settings.summary_model == "from-env"


# --- (c) the API key stays secret ----------------------------------------------


def test_anthropic_api_key_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)

    settings = Settings(_env_file=None)

    assert isinstance(settings.anthropic_api_key, SecretStr)
    for shown in (
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        str(settings.model_dump()),
        repr(settings.anthropic_api_key),
        str(settings.anthropic_api_key),
    ):
        assert SECRET not in shown
        assert SECRET[-10:] not in shown


# --- (d) .env.example documents every setting, and nothing else -----------------


def test_env_example_lists_every_setting() -> None:
    variables = _example_variables()

    missing = [
        field for field in Settings.model_fields if not _accepted_names(field) & variables.keys()
    ]
    assert not missing, f".env.example lacks {missing}"


def test_env_example_has_no_unknown_variable() -> None:
    known = {name: field for field in Settings.model_fields for name in _accepted_names(field)}

    unknown = sorted(set(_example_variables()) - known.keys())
    assert not unknown, f".env.example sets variables Settings ignores: {unknown}"


def test_env_example_sets_each_setting_once() -> None:
    variables = _example_variables()

    for field in Settings.model_fields:
        assert len(_accepted_names(field) & variables.keys()) <= 1, field


def test_env_example_uses_the_documented_names() -> None:
    variables = _example_variables()

    assert {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "STRATA_PORT"} <= variables.keys()


def test_env_example_leaves_secrets_empty() -> None:
    variables = _example_variables()

    assert variables["ANTHROPIC_API_KEY"] == ""
    assert variables["STRATA_API_KEYS"] == ""


def test_env_example_values_are_the_defaults(tmp_path: Path) -> None:
    """Copying .env.example to .env changes nothing until an operator edits it."""
    env_file = tmp_path / ".env"
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    env_file.write_text(text.replace("STRATA_LOG_LEVEL=info", "STRATA_LOG_LEVEL=edited"), "utf-8")

    from_example = Settings(_env_file=env_file).model_dump()

    assert from_example.pop("log_level") == "edited"  # the copy is read
    defaults = Settings(_env_file=None).model_dump()
    defaults.pop("log_level")
    assert from_example == defaults


# --- (e) STRATA_API_KEYS ---------------------------------------------------------


def test_api_keys_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = "ab" * 32
    monkeypatch.setenv("STRATA_API_KEYS", f" tenant:key , other:sha256:{digest},,")

    keys = Settings(_env_file=None).configured_keys

    assert keys == [
        ConfiguredKey(tenant="tenant", secret="key"),
        ConfiguredKey(tenant="other", secret=f"sha256:{digest}"),
    ]


@pytest.mark.parametrize("entry", ["no-separator", ":key-without-tenant", "tenant-without-key:"])
def test_malformed_api_key_entry_is_rejected(entry: str) -> None:
    settings = Settings(_env_file=None, api_keys=f"good:key,{entry}")

    with pytest.raises(ValueError, match="tenant:key"):
        _ = settings.configured_keys


# --- (f) display time zone -------------------------------------------------------


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd"])
def test_unknown_display_timezone_is_rejected(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    monkeypatch.setenv("STRATA_DISPLAY_TIMEZONE", zone)

    with pytest.raises(ValidationError, match="display_timezone"):
        Settings(_env_file=None)


def test_known_display_timezone_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATA_DISPLAY_TIMEZONE", "Europe/Paris")

    assert Settings(_env_file=None).display_timezone == "Europe/Paris"


# --- (g) loopback hosts ----------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback_host(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_a_variable_no_setting_reads_is_unknown_with_the_closest_setting() -> None:
    assert unknown_variables(["STRATA_MEMORY_BLOK_MAX_CHARS", "STRATA_NOTHING_LIKE_IT"]) == {
        "STRATA_MEMORY_BLOK_MAX_CHARS": "STRATA_MEMORY_BLOCK_MAX_CHARS",
        "STRATA_NOTHING_LIKE_IT": None,
    }


def test_settings_aliases_and_the_kits_variables_are_known() -> None:
    names = ["STRATA_PORT", "PORT", "STRATA_URL", "STRATA_API_KEY", "STRATA_TEST_DATABASE", "HOME"]
    assert unknown_variables(names) == {}


def test_the_env_file_counts_among_the_configured_variables(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("STRATA_DATA_DIRR=/srv\n")

    names = configured_variables({"HOME": "/root"}, env_file)

    assert unknown_variables(names) == {"STRATA_DATA_DIRR": "STRATA_DATA_DIR"}
