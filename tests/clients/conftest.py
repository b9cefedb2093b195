"""The generated-client checks start real servers the way the e2e tests do.

The fixtures are imported from tests/e2e/conftest.py rather than copied or moved: a fixture
is visible to the tests below the conftest that defines or imports it, and these tests need
exactly what the e2e tests use (`strata_procs`: `strata serve` subprocesses on loopback with
their own migrated database, pointed at the fake Messages API). The report hook makes
`strata_procs` print the servers' logs when a test fails.
"""

from __future__ import annotations

from tests.e2e.conftest import (
    pytest_runtest_makereport,
    strata_env,
    strata_procs,
)

__all__ = ["pytest_runtest_makereport", "strata_env", "strata_procs"]
