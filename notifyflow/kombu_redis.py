"""kombu's Redis transport with one client object per channel for publishing.

kombu builds a new ``redis.Redis`` object for every message it publishes
(``Channel._put`` -> ``conn_or_acquire`` -> ``_create_client``). The object holds no
connection (the channel's pool does), but redis-py's constructor is wrapped by its
``deprecated_args`` decorator, which inspects the call's arguments each time: ~5% of a
``POST /api/v1/triggers/`` under gunicorn (py-spy, bench/README.md). The channel's
synchronous client is built once and reused; redis-py clients are thread-safe and share
the same pool as before, so connections, reconnects and retries behave as they did.
Selected for ``redis://`` brokers by ``CELERY_BROKER_TRANSPORT`` (settings).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)
        if self._sync_client is None:
            self._sync_client = super()._create_client()
        return self._sync_client


class Transport(kombu_redis.Transport):
    Channel = Channel
