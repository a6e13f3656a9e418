#!/usr/bin/env bash
# `make run`: the whole system on its embedded default (SQLite + filesystem broker under
# var/): migrate, load the demo workflow, create an API key, start web + worker + beat.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT="${PORT:-8000}"
export SMS_BACKEND="${SMS_BACKEND:-console}"
export EMAIL_BACKEND="${EMAIL_BACKEND:-django.core.mail.backends.console.EmailBackend}"
# One metrics directory for web, worker and beat, emptied at each start: /metrics then
# includes the worker's step counters (notifyflow/metrics.py).
export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-$PWD/var/prometheus}"
mkdir -p "$PROMETHEUS_MULTIPROC_DIR" && rm -f "$PROMETHEUS_MULTIPROC_DIR"/*.db
# A local demo: the console backends are wanted here (refused elsewhere unless allowed),
# the site answers on loopback, and the secret key is generated once and kept in var/.
export NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS="${NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS:-1}"
export DJANGO_ALLOWED_HOSTS="${DJANGO_ALLOWED_HOSTS:-localhost,127.0.0.1}"
mkdir -p var
if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
    [ -s var/dev-secret-key ] || (umask 077; $PY -c "import secrets; print(secrets.token_urlsafe(50))" > var/dev-secret-key)
    DJANGO_SECRET_KEY="$(cat var/dev-secret-key)"
    export DJANGO_SECRET_KEY
fi

$PY manage.py migrate --noinput -v0
$PY manage.py collectstatic --noinput -v0
$PY manage.py load_demo
KEY=$($PY manage.py create_api_key "demo-$(date +%s)" 2>/dev/null | tail -n 1)

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

# The filesystem broker has no fanout: run without gossip/mingle/heartbeat. Prefork, so
# the step time limits and the per-child memory cap hold (the solo pool ignores both).
.venv/bin/celery -A notifyflow worker -l INFO -P prefork -c 2 -O fair --without-gossip \
    --without-mingle --without-heartbeat & pids+=($!)
.venv/bin/celery -A notifyflow beat -l INFO -s var/celerybeat-schedule \
    -S django_celery_beat.schedulers:DatabaseScheduler & pids+=($!)
.venv/bin/gunicorn notifyflow.wsgi:application -b "127.0.0.1:${PORT}" -w 2 \
    --access-logfile - & pids+=($!)

for _ in $(seq 1 50); do
    curl -fsS "http://127.0.0.1:${PORT}/healthz" >/dev/null 2>&1 && break; sleep 0.2
done
cat <<MSG

NotifyFlow is running on http://127.0.0.1:${PORT}  (admin: /admin/, API docs: /api/docs/)
API key (shown once): ${KEY}

Trigger the demo workflow (email now, SMS ~10 s later); run it twice to see idempotency:

curl -sS -X POST http://127.0.0.1:${PORT}/api/v1/triggers/ -H "Authorization: Bearer ${KEY}" -H "Content-Type: application/json" -d '{"workflow": "welcome-demo", "idempotency_key": "demo-1", "payload": {"name": "Ada", "email": "ada@example.com", "phone": "+15005550006"}}'

Ctrl-C stops everything.
MSG
wait -n "${pids[@]}"
