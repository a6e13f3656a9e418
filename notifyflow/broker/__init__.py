"""Everything NotifyFlow does to Celery's and kombu's broker plumbing, in one place.

- ``publish``: how ``notifyflow.celery.send_task_on_commit`` puts messages on the queue:
  Celery's own ``send_task``, or (``NOTIFYFLOW_FAST_PUBLISH``, Redis only) a mirror of
  the envelope kombu's Redis transport writes, pushed in one round trip.
- ``kombu_patches``: kombu's Redis transport with one client per channel
  (``CELERY_BROKER_TRANSPORT``) and the worker event loop's timer fix
  (``NOTIFYFLOW_KOMBU_TIMER_FIX``).
- ``consumer``: Celery's worker consumer without its Gossip step
  (``CELERY_WORKER_CONSUMER``); its own module so web processes, which load the
  transport, do not import Celery's worker.

Each is switchable by a setting (notifyflow/engine_settings.py, docs "Settings"), and each has a
test that fails when kombu or Celery changes what it mirrors or fixes
(tests/notifyflow/broker/test_publish.py, test_kombu_patches.py,
tests/notifyflow/test_brokers.py).
"""
