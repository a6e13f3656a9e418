#!/usr/bin/env bash
# `make run`: the whole system on its embedded default (SQLite + filesystem broker under
# var/, unless DATABASE_URL / CELERY_BROKER_URL say otherwise): write var/.env, migrate,
# load the demo workflow, reuse (or create once) the demo API key, start web + worker +
# beat. `scripts/run.sh --setup-only` does everything but start the processes.
#
# var/.env holds what this local demo needs and production must set itself (a generated
# secret key, the allowed hosts, the console backends, the database and broker URLs, the
# demo key). The settings read it, so `.venv/bin/python manage.py createsuperuser` (or
# any manage.py, celery or gunicorn command) works in a plain shell afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
BIN="$(dirname "$PY")"
PORT="${PORT:-8000}"
SETUP_ONLY=0
[ "${1:-}" = "--setup-only" ] && SETUP_ONLY=1

VAR="${NOTIFYFLOW_VAR_DIR:-var}"
ENV_FILE="${NOTIFYFLOW_ENV_FILE:-$VAR/.env}"
mkdir -p "$VAR"
if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
    [ -s "$VAR/dev-secret-key" ] || (umask 077; $PY -c "import secrets; print(secrets.token_urlsafe(50))" > "$VAR/dev-secret-key")
    DJANGO_SECRET_KEY="$(cat "$VAR/dev-secret-key")"
fi
# Kept across starts: the demo key (checked, and replaced if revoked, by demo_api_key).
KEPT="$(grep -s '^NOTIFYFLOW_DEMO_API_KEY=' "$ENV_FILE" || true)"
(
    umask 077
    {
        echo "# Written by \`make run\` (scripts/run.sh) at each start; read by notifyflow/settings.py."
        echo "# Variables set in the environment win over these."
        echo "DJANGO_SECRET_KEY='${DJANGO_SECRET_KEY}'"
        echo "DJANGO_ALLOWED_HOSTS='${DJANGO_ALLOWED_HOSTS:-localhost,127.0.0.1}'"
        # A local demo: the console backends are wanted here (refused elsewhere unless allowed).
        echo "NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS='${NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS:-1}'"
        echo "EMAIL_BACKEND='${EMAIL_BACKEND:-django.core.mail.backends.console.EmailBackend}'"
        echo "SMS_BACKEND='${SMS_BACKEND:-console}'"
        # Where the unsubscribe links of emails point (the demo workflow sends email).
        echo "NOTIFYFLOW_PUBLIC_URL='${NOTIFYFLOW_PUBLIC_URL:-http://127.0.0.1:${PORT}}'"
        if [ -n "${DATABASE_URL:-}" ]; then echo "DATABASE_URL='${DATABASE_URL}'"; fi
        if [ -n "${CELERY_BROKER_URL:-}" ]; then echo "CELERY_BROKER_URL='${CELERY_BROKER_URL}'"; fi
        if [ -n "$KEPT" ]; then echo "$KEPT"; fi
    } > "$ENV_FILE.tmp"
    mv "$ENV_FILE.tmp" "$ENV_FILE"
)
export NOTIFYFLOW_ENV_FILE="$ENV_FILE"

$PY manage.py migrate --noinput -v0
$PY manage.py collectstatic --noinput -v0
$PY manage.py load_demo
KEY=$($PY manage.py demo_api_key --env-file "$ENV_FILE" | tail -n 1)
# A new idempotency key at each start, so the printed curl creates an instance (the
# same curl twice shows the replay).
IDEMPOTENCY_KEY="demo-$(date +%Y%m%d-%H%M%S)-$RANDOM"

print_usage() {
    cat <<MSG

NotifyFlow is running on http://127.0.0.1:${PORT}  (admin: /admin/, API docs: /api/docs/)
API key (kept in ${ENV_FILE}): ${KEY}
First admin user: .venv/bin/python manage.py createsuperuser

Trigger the demo workflow (email now, SMS ~10 s later); run it twice to see idempotency:

curl -sS -X POST http://127.0.0.1:${PORT}/api/v1/triggers/ -H "Authorization: Bearer ${KEY}" -H "Content-Type: application/json" -d '{"workflow": "welcome-demo", "idempotency_key": "${IDEMPOTENCY_KEY}", "payload": {"name": "Ada", "email": "ada@example.com", "phone": "+15005550006"}}'

Ctrl-C stops everything.
MSG
}

if [ "$SETUP_ONLY" = 1 ]; then
    print_usage
    exit 0
fi

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

# The filesystem broker has no fanout: run without gossip/mingle/heartbeat. Prefork, so
# the step time limits and the per-child memory cap hold (the solo pool ignores both).
"$BIN/celery" -A notifyflow worker -l INFO -P prefork -c 2 -O fair --without-gossip \
    --without-mingle --without-heartbeat & pids+=($!)
"$BIN/celery" -A notifyflow beat -l INFO -s "$VAR/celerybeat-schedule" \
    -S django_celery_beat.schedulers:DatabaseScheduler & pids+=($!)
"$BIN/gunicorn" notifyflow.wsgi:application -b "127.0.0.1:${PORT}" -w 2 \
    --access-logfile - & pids+=($!)

for _ in $(seq 1 50); do
    curl -fsS "http://127.0.0.1:${PORT}/healthz" >/dev/null 2>&1 && break; sleep 0.2
done
print_usage
wait -n "${pids[@]}"
