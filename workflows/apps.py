from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from notifyflow import db

        # The lowest app: every process (API, worker, beat, commands) loads it.
        connection_created.connect(
            db.tolerate_out_of_range_timestamps, dispatch_uid="nf_out_of_range_timestamps"
        )
