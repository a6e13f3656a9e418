#!/usr/bin/env bash
# `make run`: the whole system on its embedded default (SQLite + filesystem broker under
# var/, unless DATABASE_URL / CELERY_BROKER_URL say otherwise): check that PORT (8000) is
# free, write var/.env, collect the static files, migrate, load the demo workflow, reuse
# (or create once) the demo API key, start web + worker + beat on 127.0.0.1:$PORT.
# `scripts/run.sh --setup-only` does everything but check the port and start the processes.
#
# var/.env holds what this local demo needs and production must set itself (a generated
# secret key, the allowed hosts, the console backends, the database and broker URLs, the
# demo key). The settings read it, so `.venv/bin/python manage.py createsuperuser` (or
# any manage.py, celery or gunicorn command) works in a plain shell afterwards. Its lines
# above the "Yours" line are rewritten at each start; the lines below it are kept.
#
# Ctrl-C or SIGTERM stops every process: TERM, then KILL for whatever is left after
# STOP_TIMEOUT_S (8) seconds (a worker's pool too), so make run ends within 15 s.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
BIN="$(dirname "$PY")"
PORT="${PORT:-8000}"
STOP_TIMEOUT_S="${STOP_TIMEOUT_S:-8}"
SETUP_ONLY=0
[ "${1:-}" = "--setup-only" ] && SETUP_ONLY=1

# The port before anything else: when another program listens there, say so and stop,
# rather than start a server that cannot bind and print a banner about someone else's.
if [ "$SETUP_ONLY" = 0 ]; then
    "$PY" - "$PORT" <<'PYTHON' || exit 1
import socket
import sys


def free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


raw = sys.argv[1]
if not raw.isdigit() or not 0 < int(raw) < 65536:
    sys.exit(f"make run: PORT={raw!r} is not a port number (1-65535), e.g. PORT=8001 make run")
port = int(raw)
if not free(port):
    other = next((p for p in range(port + 1, min(port + 100, 65536)) if free(p)), None)
    sys.exit(
        f"make run: port {port} is taken (another program listens on 127.0.0.1:{port}); "
        f"stop it or choose another port: PORT={other or '<free port>'} make run"
    )
PYTHON
fi

VAR="${NOTIFYFLOW_VAR_DIR:-var}"
ENV_FILE="${NOTIFYFLOW_ENV_FILE:-$VAR/.env}"
mkdir -p "$VAR"
if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
    [ -s "$VAR/dev-secret-key" ] || (umask 077; $PY -c "import secrets; print(secrets.token_urlsafe(50))" > "$VAR/dev-secret-key")
    DJANGO_SECRET_KEY="$(cat "$VAR/dev-secret-key")"
fi

# var/.env: the lines above YOURS are this script's, rewritten at each start from its
# environment; the lines below it are kept (the demo key, and whatever a user added: a
# variable set there wins over the same one above, the file's last line being the one
# read). A file without the line (new, or written by an older version) keeps its lines
# that set none of OWNED, and gets the demo's webhook host once.
YOURS="# ---- Yours: lines below are kept across starts and win over the lines above ----"
OWNED="DJANGO_SECRET_KEY|DJANGO_ALLOWED_HOSTS|NOTIFYFLOW_ALLOW_CONSOLE_BACKENDS|EMAIL_BACKEND|SMS_BACKEND|NOTIFYFLOW_PUBLIC_URL|DATABASE_URL|CELERY_BROKER_URL"
KEPT=""
SEED_WEBHOOK_HOST=0
if [ -f "$ENV_FILE" ] && grep -qxF -- "$YOURS" "$ENV_FILE"; then
    KEPT="$(awk -v mark="$YOURS" 'below { print } $0 == mark { below = 1 }' "$ENV_FILE")"
else
    if [ -f "$ENV_FILE" ]; then
        KEPT="$(grep -vE "^[[:space:]]*(#|$)|^[[:space:]]*(export[[:space:]]+)?($OWNED)[[:space:]]*=" "$ENV_FILE" || true)"
    fi
    grep -qE '^[[:space:]]*(export[[:space:]]+)?NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS[[:space:]]*=' <<<"$KEPT" \
        || SEED_WEBHOOK_HOST=1
fi
# The demo key unquoted (older versions quoted it), so `sed -n 's/^NOTIFYFLOW_DEMO_API_KEY=//p'
# var/.env` (the README's walks) reads it.
KEPT="$(sed -E "s/^NOTIFYFLOW_DEMO_API_KEY=['\"]([^'\"]*)['\"][[:space:]]*$/NOTIFYFLOW_DEMO_API_KEY=\1/" <<<"$KEPT")"
(
    umask 077
    {
        echo "# Written by \`make run\` (scripts/run.sh); read by every manage.py, celery and gunicorn"
        echo "# of this checkout (notifyflow/env.py). Variables set in the environment win over this"
        echo "# file. The lines down to \"Yours\" are rewritten at each start from make run's"
        echo "# environment (EMAIL_BACKEND=... make run); add your own settings below it."
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
        echo "$YOURS"
        if [ -n "$KEPT" ]; then printf '%s\n' "$KEPT"; fi
        if [ "$SEED_WEBHOOK_HOST" = 1 ]; then
            echo "# The host the README's status-webhook walk posts to; add yours, comma-separated."
            echo "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS=hooks.example.com"
        fi
    } > "$ENV_FILE.tmp"
    mv "$ENV_FILE.tmp" "$ENV_FILE"
)
export NOTIFYFLOW_ENV_FILE="$ENV_FILE"

# Static files first, without the system checks: collectstatic's own check would warn
# that static files are not collected (notifyflow.W001), and migrate's would too.
$PY manage.py collectstatic --noinput --skip-checks -v0
$PY manage.py migrate --noinput -v0
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

For the README's walks, in another shell:

export KEY=${KEY}

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
# Stopping: TERM to the processes (a Ctrl-C or a SIGTERM to the process group also reaches
# them directly), then KILL to every process that was below this script - a worker's pool
# included, also one that lost its parent - if any is left after STOP_TIMEOUT_S.
# This script's own short-lived helpers (sleep, and ps, awk, sort in the subshells of
# $(...)) are left out: their pids, remembered past their end, could name someone
# else's process later. What it started is in ${pids[@]}; the rest is below those.
descendants() {
    ps -A -o pid= -o ppid= 2>/dev/null | awk -v root=$$ -v started="${pids[*]}" '
        BEGIN { n = split(started, list, " "); for (i = 1; i <= n; i++) ours[list[i]] = 1 }
        { parent[$1] = $2 }
        END {
            for (pid in parent) {
                up = parent[pid]
                if (up == root && !(pid in ours)) continue
                if (parent[up] == root && !(up in ours)) continue
                while (up in parent && up != root && up > 1) up = parent[up]
                if (up == root) print pid
            }
        }'
}
any_alive() {  # zombies do not count: they are dead, waiting to be reaped
    [ $# -gt 0 ] || return 1
    ps -o stat= -p "$(IFS=,; echo "$*")" 2>/dev/null | grep -qv '^Z'
}
stop_all() {
    trap '' INT TERM
    set +e
    [ "${#pids[@]}" -gt 0 ] || return 0
    local tree deadline=$((SECONDS + STOP_TIMEOUT_S))
    tree="$(echo "${pids[@]}" $(descendants) | tr ' ' '\n' | sort -un)"
    kill -TERM "${pids[@]}" 2>/dev/null
    while [ "$SECONDS" -lt "$deadline" ]; do
        tree="$(echo $tree $(descendants) | tr ' ' '\n' | sort -un)"
        # shellcheck disable=SC2086
        any_alive $tree || break
        sleep 0.2
    done
    # shellcheck disable=SC2086
    if any_alive $tree; then
        echo "make run: still running ${STOP_TIMEOUT_S} s after SIGTERM: killing what is left" >&2
        # shellcheck disable=SC2086
        kill -KILL $tree 2>/dev/null
    fi
    wait 2>/dev/null
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The filesystem broker has no fanout: run without gossip/mingle/heartbeat. Prefork, so
# the step time limits and the per-child memory cap hold (the solo pool ignores both).
"$BIN/celery" -A notifyflow worker -l INFO -P prefork -c 2 -O fair --without-gossip \
    --without-mingle --without-heartbeat & pids+=($!)
"$BIN/celery" -A notifyflow beat -l INFO -s "$VAR/celerybeat-schedule" \
    -S django_celery_beat.schedulers:DatabaseScheduler & pids+=($!)
"$BIN/gunicorn" notifyflow.wsgi:application -b "127.0.0.1:${PORT}" -w 2 \
    --graceful-timeout 5 --access-logfile - & pids+=($!)
WEB=$!

# The banner only once this gunicorn answers: a web server that died (the port taken
# meanwhile, a broken import) is an error, never "running".
for _ in $(seq 1 300); do
    if ! kill -0 "$WEB" 2>/dev/null; then
        echo "make run: the web server (gunicorn) exited during start-up; see its log above" >&2
        exit 1
    fi
    curl -fsS "http://127.0.0.1:${PORT}/healthz" >/dev/null 2>&1 && break
    sleep 0.2
done
if ! curl -fsS "http://127.0.0.1:${PORT}/healthz" >/dev/null 2>&1; then
    echo "make run: http://127.0.0.1:${PORT}/healthz did not answer within 60 s; stopping" >&2
    exit 1
fi
print_usage
# Until one of them exits (then the others are stopped), or Ctrl-C / SIGTERM.
set +e
wait -n "${pids[@]}"
status=$?
echo "make run: a process exited (status ${status}); stopping the others" >&2
# Never 0: make run ended because a process did (one that a Ctrl-C reached before this
# script's own trap ran exits 0).
exit $((status == 0 ? 1 : status))
