"""Admin helpers about trigger instances, shared with the executions console."""

from __future__ import annotations

import uuid

from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from notifyflow.ids import short_id


def instance_link(instance_id: uuid.UUID | str) -> SafeString:
    url = reverse("admin:triggers_triggerinstance_change", args=[quote(instance_id)])
    return format_html('<a href="{}"><code>{}</code></a>', url, short_id(instance_id))
