"""The settings of the step engine, of delivery and of Celery (star-imported at the end
of ``notifyflow.settings``): everything from environment variables with working
defaults, checked for the orders that keep a step from outliving its lease."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from notifyflow.env import (
    VAR_DIR,
    broker_kind,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_providers,
)

# --- Delivery ---------------------------------------------------------------------------
NOTIFYFLOW_EMAIL_BACKENDS = env_providers("NOTIFYFLOW_EMAIL_BACKENDS")
NOTIFYFLOW_SMS_BACKENDS = env_providers("NOTIFYFLOW_SMS_BACKENDS")
# Circuit breaker per provider and process: after N transient failures in a row the
# provider is skipped for OPEN_S seconds. 0 turns it off.
NOTIFYFLOW_CIRCUIT_FAILURES = env_int("NOTIFYFLOW_CIRCUIT_FAILURES", 0)
NOTIFYFLOW_CIRCUIT_OPEN_S = env_float("NOTIFYFLOW_CIRCUIT_OPEN_S", 60)
# Send slots per channel in each worker (executions/channel_slots.py): the sends of one
# channel may hold at most this many of the worker's processes at once (0: all but one),
# so a hung provider leaves the other channels a process. A step that finds no free slot
# within SLOT_WAIT_S sends nothing and runs again BUSY_RETRY_S later (no attempt counted).
NOTIFYFLOW_CHANNEL_SLOTS = env_int("NOTIFYFLOW_CHANNEL_SLOTS", 0)
NOTIFYFLOW_CHANNEL_SLOT_WAIT_S = env_float("NOTIFYFLOW_CHANNEL_SLOT_WAIT_S", 0.5)
NOTIFYFLOW_CHANNEL_BUSY_RETRY_S = env_float("NOTIFYFLOW_CHANNEL_BUSY_RETRY_S", 5)
# Given to Twilio as each message's StatusCallback (the public URL of
# /webhooks/twilio/status/); empty: Twilio sends no status callbacks.
NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL = os.environ.get("NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL", "")
# webhook node: the only hosts it may call (checked at save and at send), the HMAC key
# of its X-NotifyFlow-Signature header, its timeout.
NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [
    h.strip().lower()
    for h in os.environ.get("NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS", "").split(",")
    if h.strip()
]
NOTIFYFLOW_WEBHOOK_SECRET = os.environ.get("NOTIFYFLOW_WEBHOOK_SECRET", "")
# Web Push: the only hosts a subscription's endpoint may name (same syntax as the
# webhook allow-list; checked when a device is saved and again at send), so channel data
# given inline cannot make the workers an open HTTP client. Default: the browsers' push
# services. Plain http only to a loopback host listed here (a test's fake).
NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS = [
    h.lower()
    for h in env_list(
        "NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS",
        "fcm.googleapis.com,updates.push.services.mozilla.com,*.notify.windows.com,"
        "web.push.apple.com",
    )
]
NOTIFYFLOW_WEBHOOK_TIMEOUT_S = env_float("NOTIFYFLOW_WEBHOOK_TIMEOUT_S", 10)
# Status webhooks to the customer's endpoints (status_webhooks): the timeout of one POST
# (capped at half the task soft time limit, so a hung endpoint never outlives a task),
# how many messages one deliverer claims and POSTs at once, and how long a rotated-out
# secret keeps signing next to the new one.
NOTIFYFLOW_STATUS_WEBHOOK_TIMEOUT_S = env_float("NOTIFYFLOW_STATUS_WEBHOOK_TIMEOUT_S", 10)
NOTIFYFLOW_STATUS_WEBHOOK_BATCH = env_int("NOTIFYFLOW_STATUS_WEBHOOK_BATCH", 50)
NOTIFYFLOW_STATUS_WEBHOOK_ROTATION_OVERLAP_S = env_int(
    "NOTIFYFLOW_STATUS_WEBHOOK_ROTATION_OVERLAP_S", 24 * 3600
)
# Where recipients reach this installation: the one-click unsubscribe links of emails
# (``{NOTIFYFLOW_PUBLIC_URL}/u/{token}/``). Required once recipients exist and
# an active, non-critical workflow has an email node (system check notifyflow.E010).
NOTIFYFLOW_PUBLIC_URL = os.environ.get("NOTIFYFLOW_PUBLIC_URL", "").strip().rstrip("/")
# How long a recipient token of the in-app feed API is good for: the
# customer's front end mints a new one (through its own backend) before it expires.
NOTIFYFLOW_FEED_TOKEN_TTL_S = env_int("NOTIFYFLOW_FEED_TOKEN_TTL_S", 3600)

# --- Engine ---------------------------------------------------------------------------
# Node types beyond the built-in ones: dotted module paths, comma-separated, imported when
# the executions app is ready; each registers its node type (docs/architecture.md, "How
# to add a node type").
NOTIFYFLOW_NODE_MODULES = env_list("NOTIFYFLOW_NODE_MODULES")
NOTIFYFLOW_RETRY_BASE_DELAY_S = env_float("NOTIFYFLOW_RETRY_BASE_DELAY_S", 60)
NOTIFYFLOW_MAX_RETRIES = env_int("NOTIFYFLOW_MAX_RETRIES", 3)
# Order matters: soft limit < hard limit < lease < broker visibility timeout.
NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S = env_int("NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S", 30)
NOTIFYFLOW_STEP_TIME_LIMIT_S = env_int("NOTIFYFLOW_STEP_TIME_LIMIT_S", 45)
NOTIFYFLOW_LEASE_S = env_int("NOTIFYFLOW_LEASE_S", 90)
NOTIFYFLOW_SWEEP_INTERVAL_S = env_float("NOTIFYFLOW_SWEEP_INTERVAL_S", 5)
NOTIFYFLOW_SWEEP_BATCH = env_int("NOTIFYFLOW_SWEEP_BATCH", 500)
# List fan-out jobs (triggers/fanout.py): a job holds its lease this long past each
# batch (the sweeper resumes it after that when its worker died), and runs for at most
# this long before sending itself again (under the task time limits).
NOTIFYFLOW_FANOUT_LEASE_S = env_int("NOTIFYFLOW_FANOUT_LEASE_S", 60)
NOTIFYFLOW_FANOUT_SLICE_S = env_float("NOTIFYFLOW_FANOUT_SLICE_S", 20)
# Instances per INSERT of a fan-out (one transaction each, with its progress).
NOTIFYFLOW_FANOUT_BATCH = env_int("NOTIFYFLOW_FANOUT_BATCH", 2000)
# A due instance with no claim after this long is assumed to have lost its message.
NOTIFYFLOW_REDISPATCH_AFTER_S = env_float("NOTIFYFLOW_REDISPATCH_AFTER_S", 30)
# Delays longer than this never go to the broker as a countdown; the sweeper wakes them.
# A worker holds a countdown's message unacked until it is due: on RabbitMQ this must stay
# well under the server's consumer_timeout (30 min by default), which closes the channel.
NOTIFYFLOW_BROKER_HORIZON_S = env_int("NOTIFYFLOW_BROKER_HORIZON_S", 600)
# Redis re-delivers an unacked message after this; it must exceed every countdown we
# hand the broker and every task's runtime (kombu#337, celery#2599).
NOTIFYFLOW_VISIBILITY_TIMEOUT_S = env_int("NOTIFYFLOW_VISIBILITY_TIMEOUT_S", 3600)

# Worker event loop: fire all due ETA timers without a 1 s poll between batches of 10
# (notifyflow/broker/kombu_patches.py). Off only to measure stock kombu.
NOTIFYFLOW_KOMBU_TIMER_FIX = env_bool("NOTIFYFLOW_KOMBU_TIMER_FIX", True)

# Workers commit asynchronously except for a step's outcome (executions/worker_hooks.py):
# one fsync per step instead of three.
NOTIFYFLOW_WORKER_ASYNC_COMMIT = env_bool("NOTIFYFLOW_WORKER_ASYNC_COMMIT", True)

# --- Celery ---------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
# redis (production default), amqp (RabbitMQ, supported), or an embedded one (filesystem,
# memory): README "Brokers" says what each gives.
NOTIFYFLOW_BROKER_KIND = broker_kind(CELERY_BROKER_URL)
CELERY_BROKER_FILESYSTEM_DIR = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    for _sub in ("queue", "processed", "control"):
        (CELERY_BROKER_FILESYSTEM_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_FILESYSTEM_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_FILESYSTEM_DIR / "queue"),
        "processed_folder": str(CELERY_BROKER_FILESYSTEM_DIR / "processed"),
        "control_folder": str(CELERY_BROKER_FILESYSTEM_DIR / "control"),
        "store_processed": False,
    }
elif NOTIFYFLOW_BROKER_KIND == "amqp":
    # RabbitMQ's own acknowledgement of every publish: a publish the broker did not take
    # (restart, resource alarm) raises, so the caller's "left for the sweeper" path
    # applies instead of a message lost in a socket buffer. Unacked messages come back
    # when their consumer's connection closes: no visibility timeout here.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": NOTIFYFLOW_VISIBILITY_TIMEOUT_S,
        # A Redis that restarts closes its sockets and every process reconnects at once;
        # these bound the cases where it vanishes without closing them (failover, NAT):
        # a connect or a publish never hangs, and an idle socket is probed.
        "socket_connect_timeout": 5,
        "socket_timeout": 30,
        "socket_keepalive": True,
        # BRPOP names a worker's queues in CELERY_TASK_QUEUES order, every time (kombu's
        # default, round_robin, rotates the list after each message it takes).
        "queue_order_strategy": "priority",
    }
# kombu's Redis transport, minus a new client object per published message
# (notifyflow/broker/kombu_patches.py).
if CELERY_BROKER_URL.startswith("redis://"):
    CELERY_BROKER_TRANSPORT = "notifyflow.broker.kombu_patches:Transport"
# Publishing (notifyflow/broker/publish.py): on, send_task's per-call routing and queue
# declare are done once per task, and on Redis the envelope kombu would write is pushed
# straight onto the queue's list, a batch in one round trip; off, every message goes
# through Celery's own send_task and kombu's producer (to rule the mirror out).
NOTIFYFLOW_FAST_PUBLISH = env_bool("NOTIFYFLOW_FAST_PUBLISH", True)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# At-least-once: a message is acked after the task ran; a worker that dies mid-task gets
# its message redelivered. The database attempts counter bounds the redeliveries.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Priority lanes: one queue per lane, and every step's message goes to its
# own instance's lane (triggers/dispatch.py LANE_QUEUES). A plain `celery -A notifyflow
# worker` consumes every queue listed here, critical first: on Redis its BRPOP names
# the lists in this order (queue_order_strategy "priority" below), so the first
# non-empty one is taken; on RabbitMQ each queue has its own consumer and the broker
# hands them messages in turn as prefetch credit frees (README "Priority lanes").
# "celery", the default queue before lanes, comes last so messages sent before an
# upgrade still run.
CELERY_TASK_DEFAULT_QUEUE = "notifyflow.default"
# Each queue bound by its own name: on RabbitMQ two queues sharing the default routing
# key would each get a copy of every message.
CELERY_TASK_QUEUES = tuple(
    Queue(name, routing_key=name)
    for name in (
        "notifyflow.critical",
        "notifyflow.high",
        "notifyflow.default",
        "notifyflow.bulk",
        "celery",
    )
)
# Housekeeping: the sweeper and the purge are short and time-sensitive (a lease to
# recover, a due instance to re-send); status-webhook deliveries and woken waits are
# next. A list fan-out's job goes to the default lane, not bulk: a job that runs past
# its slice sends itself again, and in bulk it would wait behind the very instances it
# created (a normal workflow's fan-out runs them in bulk).
CELERY_TASK_ROUTES = {
    "notifyflow.sweep": {"queue": "notifyflow.critical"},
    "notifyflow.purge_finished": {"queue": "notifyflow.critical"},
    "notifyflow.deliver_status_webhooks": {"queue": "notifyflow.high"},
    "notifyflow.wake_waiting": {"queue": "notifyflow.high"},
    "notifyflow.fanout_run": {"queue": "notifyflow.default"},
}
# Time limits hold only in the prefork pool (solo and threads ignore them): every
# worker command we document and `make run` use prefork.
CELERY_TASK_SOFT_TIME_LIMIT = NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S
CELERY_TASK_TIME_LIMIT = NOTIFYFLOW_STEP_TIME_LIMIT_S
# A prefork child whose resident memory grows past this (KiB) is replaced after its task.
NOTIFYFLOW_WORKER_MAX_MEMORY_KB = env_int("NOTIFYFLOW_WORKER_MAX_MEMORY_KB", 512 * 1024)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = NOTIFYFLOW_WORKER_MAX_MEMORY_KB
# When a worker loses Redis (restart, failover), let the steps it is running finish: the
# database records their outcome whatever the broker does, and their messages, no
# longer ackable, come back after the visibility timeout as harmless no-ops. Celery's
# alternative (True, its future default) kills them mid-step, which means a lease to
# wait out and, after a send, a duplicate message. (Celery warns at each connection
# loss that the default will change; the choice is deliberate.)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers run without Celery's Gossip step (unused here; it logged a traceback on every
# broker connection loss): notifyflow/broker/consumer.py. 1: Celery's own consumer.
CELERY_WORKER_CONSUMER = (
    "celery.worker.consumer:Consumer"
    if env_bool("NOTIFYFLOW_WORKER_GOSSIP", False)
    else "notifyflow.broker.consumer:Consumer"
)
# Workers and beat reconnect to a restarted broker (Celery's default, stated): up to 100
# tries, 2 s apart growing to 30 s, about 50 minutes before a worker gives up and exits.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = 100
# A publish (API after commit, worker after a step, beat) rides out a broker restart of a
# few seconds: 5 tries over ~3 s. After that enqueue_on_commit leaves the instance to
# the sweeper, so a request never waits longer than this on a dead broker.
CELERY_TASK_PUBLISH_RETRY = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 4,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 2,
}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ALWAYS_EAGER = False

if not (
    NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S
    < NOTIFYFLOW_STEP_TIME_LIMIT_S
    < NOTIFYFLOW_LEASE_S
    < NOTIFYFLOW_VISIBILITY_TIMEOUT_S
):
    raise ImproperlyConfigured(
        "need NOTIFYFLOW_STEP_SOFT_TIME_LIMIT_S < NOTIFYFLOW_STEP_TIME_LIMIT_S < "
        "NOTIFYFLOW_LEASE_S < NOTIFYFLOW_VISIBILITY_TIMEOUT_S"
    )
if not NOTIFYFLOW_BROKER_HORIZON_S < NOTIFYFLOW_VISIBILITY_TIMEOUT_S / 2:
    # Countdowns near the visibility timeout get redelivered (kombu#337).
    raise ImproperlyConfigured(
        "need NOTIFYFLOW_BROKER_HORIZON_S < NOTIFYFLOW_VISIBILITY_TIMEOUT_S / 2"
    )
