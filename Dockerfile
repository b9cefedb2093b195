# Strata server image.
#
#   docker build -t strata .
#   docker run -p 8000:8000 -v strata-data:/data \
#     -e STRATA_API_KEYS='acme:sha256:<hex of the key>' -e ANTHROPIC_API_KEY=... strata
#
# The container binds 0.0.0.0, and `strata serve` refuses a non-loopback address while no
# API key exists (it exits with status 2): set STRATA_API_KEYS, or create a key in the
# volume's database first with
#   docker run --rm -v strata-data:/data strata strata keys create --tenant acme
# `strata serve` applies the database migrations itself before serving.

# --- builder: a virtualenv with Strata and its dependencies ---------------------
FROM python:3.11-slim AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"

WORKDIR /srv/strata
# app/db/migrate.py finds its migrations at <project root>/alembic, next to app/, so the
# source tree stays in /srv/strata and is installed in editable mode (the venv points at it).
COPY pyproject.toml README.md alembic.ini ./
COPY alembic/ alembic/
COPY app/ app/
RUN pip install --no-cache-dir --editable . \
    && python -m compileall -q app alembic

# --- runtime: the venv and the source tree, run as an unprivileged user ----------
FROM python:3.11-slim

RUN groupadd --system --gid 10001 strata \
    && useradd --system --no-log-init --uid 10001 --gid strata \
        --home-dir /srv/strata --shell /usr/sbin/nologin strata \
    && mkdir /data \
    && chown strata:strata /data

COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /srv/strata /srv/strata

ENV PATH="/opt/venv/bin:$PATH" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    STRATA_HOST=0.0.0.0 \
    STRATA_DATA_DIR=/data \
    STRATA_DATABASE_URL=sqlite:////data/strata.db

# The port is 8000 unless STRATA_PORT or PORT (as set by many platforms) says otherwise.
# The code is owned by root and read-only for the server; /data is its only writable place.
WORKDIR /srv/strata
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as r; port = os.environ.get('STRATA_PORT') or os.environ.get('PORT') or '8000'; r.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4)"]

CMD ["strata", "serve"]
