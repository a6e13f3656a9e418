"""Celery tasks: thin, stable names, ids only. The engine does the work."""

from __future__ import annotations

from celery import shared_task

from . import engine


@shared_task(name="notifyflow.execute_node", bind=True, acks_late=True, reject_on_worker_lost=True)
def execute_node(self, instance_id: str) -> str:
    """Execute the current node of one trigger instance (no-op if not claimable)."""
    return engine.step_execute(
        instance_id=instance_id, task_id=self.request.id or "", worker=self.request.hostname or ""
    )


@shared_task(name="notifyflow.sweep", ignore_result=True)
def sweep() -> dict:
    """Periodic: re-dispatch due instances whose message was lost; recover dead leases."""
    return engine.sweep()
