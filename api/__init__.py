"""The REST API: every DRF view and serializer, above the domain apps.

``views/<resource>.py`` and ``serializers/<resource>.py`` hold one URL resource each (the
first segment under ``/api/v1/``: ``triggers``, ``workflows``, ``events``,
``workflow-triggers``, ``step-logs``), the way pretix's ``api/`` app is laid out: a
serializer used by two resources is imported from its own resource's module, never from
a view. ``auth`` and ``permissions`` are the API keys' authentication and scopes;
``urls`` is the URL list ``notifyflow.urls`` mounts. No models: the API reads and
writes through the domain apps' services and selectors.
"""
