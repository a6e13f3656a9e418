from django.apps import AppConfig


class GatesConfig(AppConfig):
    """The gates: batches (digests), throttles and send windows - the keyed state a gate
    node reads and writes, safe under any number of workers racing on one key."""

    name = "gates"
    verbose_name = "Gates"

    def ready(self) -> None:
        from triggers.retention import purge_register
        from triggers.state import instances_cancelled

        from .batches import on_instances_cancelled
        from .throttles import expired_counters_purge

        # A cancelled opener cancels its open batch and the members parked in it.
        instances_cancelled.connect(
            on_instances_cancelled, dispatch_uid="triggers_batch_opener_cancelled"
        )
        purge_register(name="throttle_counters", purge=expired_counters_purge)
