"""The decision of `app.api.site_guard`, request by request: which Host names a server
answers under, and which browser requests of other sites it refuses."""

from __future__ import annotations

import pytest

from app.api.site_guard import Refusal, SitePolicy, decide, host_name
from app.settings import Settings

HOST = "localhost:8000"


def policy(
    *, bind: str = "127.0.0.1", hosts: tuple[str, ...] = (), cors: tuple[str, ...] = ()
) -> SitePolicy:
    return SitePolicy.of(bind_host=bind, allowed_hosts=hosts, cors_origins=cors)


def post(
    rules: SitePolicy,
    *,
    host: str | None = HOST,
    origin: str | None = None,
    fetch_site: str | None = None,
    method: str = "POST",
) -> Refusal | None:
    return decide(rules, method=method, host=host, origin=origin, fetch_site=fetch_site)


def slug(refusal: Refusal | None) -> str | None:
    return refusal.slug if refusal else None


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost:8000", "localhost"),
        ("localhost.:8000", "localhost"),
        ("127.0.0.1:8000", "127.0.0.1"),
        ("[::1]:8000", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("strata.example.com", "strata.example.com"),
    ],
)
def test_host_name_drops_port_brackets_case_and_final_dot(value: str, name: str) -> None:
    assert host_name(value) == name


@pytest.mark.parametrize(
    "host", ["localhost:8000", "127.0.0.1:8000", "127.0.0.2", "[::1]:8000", "LOCALHOST"]
)
def test_loopback_names_are_allowed_hosts(host: str) -> None:
    assert post(policy(), host=host, method="GET") is None


def test_another_host_name_is_refused() -> None:
    assert slug(post(policy(), host="evil.example:8000", method="GET")) == "host-not-allowed"


def test_the_refusal_of_a_host_names_the_setting_that_allows_it() -> None:
    refusal = post(policy(), host="evil.example", method="GET")

    assert refusal is not None
    assert "'evil.example'" in refusal.detail
    assert "STRATA_ALLOWED_HOSTS" in refusal.detail


def test_the_bind_address_is_an_allowed_host() -> None:
    assert post(policy(bind="192.0.2.10"), host="192.0.2.10:8000", method="GET") is None


def test_a_configured_host_is_allowed() -> None:
    rules = policy(hosts=("Strata.Example.com",))

    assert post(rules, host="strata.example.com", method="GET") is None


def test_a_star_allows_any_host() -> None:
    assert post(policy(hosts=("*",)), host="anything.example", method="GET") is None


def test_a_request_without_host_is_not_refused_for_it() -> None:
    assert post(policy(), host=None, method="GET") is None


def test_the_default_settings_allow_only_loopback_names_and_the_bind_address() -> None:
    settings = Settings(_env_file=None)
    rules = SitePolicy.of(
        bind_host=settings.host,
        allowed_hosts=settings.allowed_host_list,
        cors_origins=settings.cors_origin_list,
    )

    assert rules.hosts == {"127.0.0.1"}
    assert post(rules, host="evil.example", method="GET") is not None


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_a_safe_method_from_another_site_goes_on(method: str) -> None:
    refusal = post(policy(), origin="https://evil.example", fetch_site="cross-site", method=method)

    assert refusal is None


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "post"])
def test_an_unsafe_method_from_another_sites_origin_is_refused(method: str) -> None:
    refusal = post(policy(), origin="https://evil.example", method=method)

    assert slug(refusal) == "cross-site-request"


@pytest.mark.parametrize("fetch_site", ["cross-site", "same-site", "Cross-Site"])
def test_a_post_the_browser_marks_from_another_origin_is_refused(fetch_site: str) -> None:
    assert slug(post(policy(), fetch_site=fetch_site)) == "cross-site-request"


@pytest.mark.parametrize("fetch_site", ["same-origin", "none"])
def test_a_post_the_browser_marks_as_its_own_goes_on(fetch_site: str) -> None:
    assert post(policy(), origin="http://localhost:8000", fetch_site=fetch_site) is None


def test_a_post_whose_origin_is_the_servers_own_goes_on() -> None:
    assert post(policy(), origin="http://localhost:8000") is None


def test_a_post_from_another_port_of_the_same_host_is_refused() -> None:
    assert slug(post(policy(), origin="http://localhost:5173")) == "cross-site-request"


def test_a_post_from_an_opaque_origin_is_refused() -> None:
    assert slug(post(policy(), origin="null")) == "cross-site-request"


def test_a_post_without_origin_or_fetch_metadata_goes_on() -> None:
    assert post(policy()) is None


def test_a_post_from_an_origin_cors_allows_goes_on() -> None:
    rules = policy(cors=("http://localhost:5173",))

    assert post(rules, origin="http://localhost:5173", fetch_site="same-site") is None


def test_cors_star_lets_any_origin_post() -> None:
    rules = policy(cors=("*",))

    assert post(rules, origin="https://evil.example", fetch_site="cross-site") is None


def test_the_refusal_of_a_post_says_which_header_told() -> None:
    refusal = post(policy(), origin="https://evil.example")

    assert refusal is not None
    assert "Origin: https://evil.example" in refusal.detail
    assert "STRATA_CORS_ORIGINS" in refusal.detail


def test_the_host_is_checked_before_the_origin() -> None:
    refusal = post(policy(), host="evil.example", origin="http://evil.example")

    assert slug(refusal) == "host-not-allowed"
