# msvmav: the HTTP API (`msvmav serve`) and the job workers (`msvmav worker`) in one image.
#
#   docker build -t msvmav .
#   docker run --rm -p 127.0.0.1:8000:8000 msvmav        # SQLite in /data, one embedded worker
#   docker run --rm -e MSVMAV_DATABASE_URL=... msvmav worker
#   docker run --rm -e MSVMAV_DATABASE_URL=... msvmav migrate
#
# The entrypoint (docker/entrypoint.sh) runs the `msvmav` command, so the command line is its
# arguments; for `serve` without MSVMAV_ADMIN_KEY on a database without keys it first creates an
# admin key and prints it to the log ("msvmav: admin key: ..."). The default command runs the
# migrations (`serve --migrate` upgrades the database to head before it starts
# uvicorn) and then serves on 0.0.0.0:8000. docker-compose.yml runs the API without an embedded
# worker (`--workers 0`) next to separate worker containers. See docs/docker.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

# The unprivileged user the service runs as, and its working directory.
RUN useradd --uid 10001 --user-group --create-home --home-dir /home/app --shell /usr/sbin/nologin app \
 && mkdir -p /data && chown app:app /data

WORKDIR /tmp/src

# The dependencies first, in their own layer: numpy/scipy/scikit-learn/matplotlib are most of
# the image and only change with pyproject.toml, so code changes rebuild in seconds.
COPY pyproject.toml ./
# The `dask` extra too: the image also runs the `dask-scheduler` and `dask-worker` services of
# docker-compose.yml's `dask` profile, and msvmav workers connect to them.
# The `export` extra: GET /models/{id}/export?format=onnx (onnx).
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['dask'] + p['optional-dependencies']['export']))" \
        > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# The project itself. README.md is the package's readme (pyproject.toml); Alembic needs no
# alembic.ini: app/core/db.py configures it in code from the installed `migrations` package.
COPY README.md ./
COPY solver ./solver
COPY app ./app
COPY migrations ./migrations
COPY docker/entrypoint.sh /usr/local/bin/msvmav-entrypoint
RUN chmod 755 /usr/local/bin/msvmav-entrypoint \
 && pip install --no-cache-dir '.[dask,export]' \
 && cd / && rm -rf /tmp/src \
 && python -c "import app.cli.main, app.main, solver, migrations, distributed; from app.core.db import MIGRATIONS_DIR; assert (MIGRATIONS_DIR / 'env.py').is_file() and any((MIGRATIONS_DIR / 'versions').glob('*.py')), MIGRATIONS_DIR"

# Working directory of the service: the default MSVMAV_DATABASE_URL (sqlite:///./msvmav.db)
# lands here. Mount a volume on /data to keep a SQLite database; compose uses PostgreSQL.
WORKDIR /data
USER app

EXPOSE 8000

# Liveness of the API (no curl in slim images). Worker containers have no HTTP server:
# docker-compose.yml disables this check for them.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/livez', timeout=4).status == 200 else 1)"]

ENTRYPOINT ["msvmav-entrypoint"]
CMD ["serve", "--migrate", "--host", "0.0.0.0", "--port", "8000"]
