"""A private PostgreSQL cluster and redis-server for the chaos tests, on free loopback
ports in a temporary directory: the tests restart and kill them, which they must never
do to the shared servers other runs (and CI's other tests) are using."""

from __future__ import annotations

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


def missing_tools() -> str | None:
    """Why the private servers cannot be started here, or None."""
    if postgres_bin() is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
    if shutil.which("redis-server") is None:
        return "no redis-server on PATH"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root (initdb refuses root) and no runuser to drop to postgres"
    return None


@dataclass
class PrivateServices:
    root: Path
    pg_bin: Path
    pg_port: int = field(default_factory=free_port)
    redis_port: int = field(default_factory=free_port)
    redis: subprocess.Popen | None = None

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

    # --- Redis -------------------------------------------------------------------------
    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def redis_start(self) -> None:
        # Persistent like docker-compose's redis (appendonly): a restart keeps the queue;
        # what it loses (the last second, unacked deliveries) the sweeper re-sends.
        (self.root / "redis").mkdir(exist_ok=True)
        self.redis = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--dir",
                str(self.root / "redis"),
                "--logfile",
                str(self.root / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not self.redis_ping():
            if self.redis.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "private redis-server did not start:\n" + (self.root / "redis.log").read_text()
                )
            time.sleep(0.05)

    def redis_stop(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.send_signal(signal.SIGTERM)
            self.redis.wait(timeout=30)
        self.redis = None

    def redis_ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.redis_port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def redis_client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.broker_url, socket_timeout=2)

    # --- lifecycle ---------------------------------------------------------------------
    @classmethod
    def start(cls) -> PrivateServices:
        root = Path(tempfile.mkdtemp(prefix="notifyflow-chaos-"))
        (root / "sockets").mkdir()
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
            shutil.chown(root / "sockets", "postgres", "postgres")
        bin_dir = postgres_bin()
        assert bin_dir is not None
        services = cls(root=root, pg_bin=bin_dir)
        try:
            services.pg_init()
            services.redis_start()
        except BaseException:
            services.stop()
            raise
        return services

    def stop(self) -> None:
        self.redis_stop()
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
