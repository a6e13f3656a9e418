"""Worker start-up hooks: what a worker (and each prefork child) does once it is up."""

from __future__ import annotations

import gc

from celery.signals import worker_process_init, worker_ready


def test_a_ready_worker_moves_its_loaded_heap_out_of_the_collectors_generations():
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        worker_ready.send(sender=None)
        assert gc.get_freeze_count() > 0
        gc.unfreeze()
        worker_process_init.send(sender=None)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
