# Strata server image: the built wheel installed (not editable) into a virtualenv.
#
#   docker build -t strata .
#   docker run -p 8000:8000 -v strata-data:/data \
#     -e STRATA_API_KEYS='acme:sha256:<hex of the key>' -e ANTHROPIC_API_KEY=... strata
#
# The container binds 0.0.0.0, and `strata serve` refuses a non-loopback address while no
# API key exists (it exits with status 2): set STRATA_API_KEYS, or create a key in the
# volume's database first with
#   docker run --rm -v strata-data:/data strata strata keys create --tenant acme
# It answers under localhost and 127.0.0.1 (a published port); reached under another name
# or address, list it: -e STRATA_ALLOWED_HOSTS=strata.example.com.
# `strata serve` applies the database migrations (shipped inside the wheel) before serving;
# `strata worker` runs jobs in a container of its own (see compose.yaml).

# --- builder: build Strata's wheel and install it into a virtualenv ---------------
FROM python:3.11-slim AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md alembic.ini ./
COPY alembic/ alembic/
COPY integrations/claude-code/ integrations/claude-code/
COPY app/ app/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir /wheels/strata-*.whl

# --- runtime: only the virtualenv, run as an unprivileged user --------------------
FROM python:3.11-slim

RUN groupadd --system --gid 10001 strata \
    && useradd --system --no-log-init --uid 10001 --gid strata \
        --home-dir /data --shell /usr/sbin/nologin strata \
    && mkdir /data \
    && chown strata:strata /data

COPY --from=builder /opt/venv /opt/venv

ENV PATH="/opt/venv/bin:$PATH" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    STRATA_HOST=0.0.0.0 \
    STRATA_DATA_DIR=/data \
    STRATA_DATABASE_URL=sqlite:////data/strata.db

# The port is 8000 unless STRATA_PORT or PORT (as set by many platforms) says otherwise.
# The code is owned by root and read-only for the server; /data is its only writable place.
WORKDIR /data
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8000

# /readyz: the database is reachable and migrated and the background loops come round
# (an unauthenticated caller gets the status code and nothing more).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as r; port = os.environ.get('STRATA_PORT') or os.environ.get('PORT') or '8000'; r.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=4)"]

CMD ["strata", "serve"]
