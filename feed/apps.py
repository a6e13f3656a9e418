from django.apps import AppConfig


class FeedConfig(AppConfig):
    """The in-app feed: items a person reads in the product, their counters, and the
    recipient tokens that let a browser read its own feed."""

    name = "feed"
    verbose_name = "In-app feed"

    def ready(self) -> None:
        from api_keys.authentication import other_token_register

        from .tokens import PREFIX

        # A recipient token opens the feed endpoints (api/feed_auth.py) and nothing else.
        other_token_register(
            prefix=PREFIX,
            refusal="a recipient token is accepted by the feed endpoints (/api/v1/feed/) "
            "only; this endpoint takes an API key",
        )
