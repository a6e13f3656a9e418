"""A private PostgreSQL cluster and broker for the chaos tests, on free loopback ports in
a temporary directory: the tests restart and kill them, which they must never do to the
shared servers other runs (and CI's other tests) are using. The broker is of the kind
the tests run on (``CELERY_BROKER_URL``): a redis-server, or a RabbitMQ node of its own
(its own node name, ports, database and logs)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

DB_NAME = "notifyflow"
# RabbitMQ's start script, run directly (the /usr/sbin wrapper switches to the rabbitmq
# user and to the system node's settings).
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bin() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin that has initdb and pg_ctl."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] if versions else None


def missing_tools(broker_kind: str = "redis") -> str | None:
    """Why the private servers cannot be started here, or None."""
    if postgres_bin() is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
    if broker_kind == "redis" and shutil.which("redis-server") is None:
        return "no redis-server on PATH"
    if broker_kind == "amqp" and not RABBITMQ_SERVER.exists():
        return f"no {RABBITMQ_SERVER}"
    if broker_kind not in ("redis", "amqp"):
        return f"no private broker for {broker_kind!r}"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root (initdb refuses root) and no runuser to drop to postgres"
    return None


@dataclass
class PrivateServices:
    root: Path
    pg_bin: Path
    broker_kind: str = "redis"
    pg_port: int = field(default_factory=free_port)
    broker_port: int = field(default_factory=free_port)
    broker_dist_port: int = field(default_factory=free_port)  # RabbitMQ's Erlang distribution
    broker: subprocess.Popen | None = None

    # --- PostgreSQL --------------------------------------------------------------------
    @property
    def database_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.pg_port}/{DB_NAME}"

    def _as_postgres(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run(
            [*prefix, *args], capture_output=True, text=True, check=check, timeout=120
        )

    def pg_init(self) -> None:
        data = self.root / "pgdata"
        self._as_postgres(
            str(self.pg_bin / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        )
        self.pg_start()
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')

    def pg_ctl(self, action: str, *args: str) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.pg_port} -k {self.root / 'sockets'}"
        self._as_postgres(
            str(self.pg_bin / "pg_ctl"),
            action,
            "-D",
            str(self.root / "pgdata"),
            "-l",
            str(self.root / "postgres.log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            *args,
        )

    def pg_start(self) -> None:
        self.pg_ctl("start")

    def pg_stop(self, mode: str = "fast") -> None:
        self.pg_ctl("stop", "-m", mode)

    def pg_restart(self) -> None:
        self.pg_ctl("restart", "-m", "fast")

    def dsn(self, dbname: str = DB_NAME) -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname={dbname} connect_timeout=3"

    def terminate_app_backends(self) -> int:
        """pg_terminate_backend of every connection to the app's database."""
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            return conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (DB_NAME,),
            ).fetchone()[0]

    def query(self, sql: str, params: Any = None) -> list[tuple] | None:
        """Run one query on a fresh connection; None while the database is down."""
        try:
            with psycopg.connect(self.dsn(), autocommit=True) as conn:
                return conn.execute(sql, params).fetchall()
        except psycopg.OperationalError:
            return None

    # --- the broker ----------------------------------------------------------------------
    @property
    def broker_url(self) -> str:
        if self.broker_kind == "amqp":
            return f"amqp://guest:guest@127.0.0.1:{self.broker_port}//"
        return f"redis://127.0.0.1:{self.broker_port}/0"

    def broker_start(self) -> None:
        """Start the broker and wait until it answers. Persistent, as in production: a
        restart keeps the queue (Redis: appendonly, like docker-compose's; RabbitMQ:
        Celery's durable queue of persistent messages); what it loses the sweeper
        re-sends."""
        log = self.root / "broker.log"
        if self.broker_kind == "amqp":
            args, env = self._rabbitmq_command()
        else:
            (self.root / "redis").mkdir(exist_ok=True)
            args = [
                "redis-server",
                "--port",
                str(self.broker_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--dir",
                str(self.root / "redis"),
                "--logfile",
                str(log),
            ]
            env = dict(os.environ)
        with open(log, "a") as out:
            self.broker = subprocess.Popen(
                args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        # A RabbitMQ node boots in ~5 s on an idle machine; generous for a busy one.
        deadline = time.monotonic() + 120
        while not self.broker_ping():
            if self.broker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"private broker did not start:\n{log.read_text()[-5000:]}")
            time.sleep(0.1)

    def _rabbitmq_command(self) -> tuple[list[str], dict[str, str]]:
        base = self.root / "rabbitmq"
        base.mkdir(exist_ok=True)
        (base / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.broker_port}\n"
            "loopback_users = none\n"
            # Chaos batches are tiny: never block publishers on a busy shared disk.
            "disk_free_limit.absolute = 1MB\n"
        )
        (base / "enabled_plugins").write_text("[].\n")
        (base / "rabbitmq-env.conf").write_text("")  # not the system node's settings
        env = {
            **os.environ,
            "RABBITMQ_NODENAME": f"nf-chaos-{self.broker_port}@localhost",
            "RABBITMQ_DIST_PORT": str(self.broker_dist_port),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_LOGS": "-",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        return [str(RABBITMQ_SERVER)], env

    def broker_stop(self) -> None:
        if self.broker is not None and self.broker.poll() is None:
            # The whole group: RabbitMQ's start script runs the Erlang VM as its child.
            os.killpg(self.broker.pid, signal.SIGTERM)
            try:
                self.broker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.broker.pid, signal.SIGKILL)
                self.broker.wait()
            if self.broker_kind == "amqp":
                # The VM may outlive the script by a moment: wait for the port to close.
                deadline = time.monotonic() + 30
                while self.broker_ping() and time.monotonic() < deadline:
                    time.sleep(0.1)
        self.broker = None

    def broker_ping(self) -> bool:
        if self.broker_kind == "amqp":
            from kombu import Connection

            try:
                with Connection(self.broker_url, connect_timeout=2) as conn:
                    conn.ensure_connection(max_retries=1)
                return True
            except Exception:  # noqa: BLE001 - any failure means not up (yet)
                return False
        import redis

        try:
            return bool(redis.Redis(port=self.broker_port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def queued_task_args(self, task: str, queue: str = "notifyflow.default") -> list[list]:
        """The args of every ``task`` message waiting in ``queue``, left where they are."""
        bodies = []
        if self.broker_kind == "amqp":
            from kombu import Connection

            # Taken unacked, then given back when the connection closes.
            with Connection(self.broker_url, connect_timeout=5) as conn:
                channel = conn.channel()
                while (message := channel.basic_get(queue, no_ack=False)) is not None:
                    if message.headers.get("task") == task:
                        bodies.append(json.loads(message.body))
        else:
            import redis

            client = redis.Redis.from_url(self.broker_url, socket_timeout=2)
            for raw in client.lrange(queue, 0, -1):
                envelope = json.loads(raw)
                if envelope["headers"]["task"] == task:
                    bodies.append(json.loads(base64.b64decode(envelope["body"])))
        return [args for args, _kwargs, _embed in bodies]

    # --- lifecycle ---------------------------------------------------------------------
    @classmethod
    def start(cls, broker_kind: str = "redis") -> PrivateServices:
        root = Path(tempfile.mkdtemp(prefix="notifyflow-chaos-"))
        (root / "sockets").mkdir()
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
            shutil.chown(root / "sockets", "postgres", "postgres")
        bin_dir = postgres_bin()
        assert bin_dir is not None
        services = cls(root=root, pg_bin=bin_dir, broker_kind=broker_kind)
        try:
            services.pg_init()
            services.broker_start()
        except BaseException:
            services.stop()
            raise
        return services

    def stop(self) -> None:
        self.broker_stop()
        if (self.root / "pgdata" / "postmaster.pid").exists():
            self._as_postgres(
                str(self.pg_bin / "pg_ctl"),
                "stop",
                "-D",
                str(self.root / "pgdata"),
                "-m",
                "immediate",
                check=False,
            )
        shutil.rmtree(self.root, ignore_errors=True)
