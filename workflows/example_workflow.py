"""The example workflow the OpenAPI schema shows (``POST /api/v1/workflows/`` and the
definition's JSON Schema): a workflow of the built-in node types, which the validator and
the API accept (tests/api/test_openapi_definition.py)."""

from __future__ import annotations

from typing import Any

# A complete workflow: welcome email, then wait up to two days for the order to be
# paid; paid -> thank-you SMS and an event for other workflows, unpaid -> a reminder
# email a day later. Cancelled when the order is cancelled.
EXAMPLE_DEFINITION: dict[str, Any] = {
    "entry_node_id": "welcome",
    "interests": ["order:{{ payload.order_id }}"],
    "cancel_on": [
        {"event": "order.cancelled", "match": "event.context.order_id == payload.order_id"}
    ],
    "nodes": [
        {
            "id": "welcome",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "Your order {{ payload.order_id }}",
                "body": "Hi {{ payload.name | default: 'there' }}, thanks for your order.",
                "html_body": "<p>Hi {{ payload.name | default: 'there' }},</p>",
            },
        },
        {
            "id": "paid",
            "type": "wait",
            "config": {
                "event": "order.paid",
                "timeout": "2d",
                "match": "event.context.order_id == payload.order_id",
            },
        },
        {
            "id": "thanks",
            "type": "sms",
            "config": {
                "to": "{{ payload.phone }}",
                "body": "Payment received for order {{ payload.order_id }}. Thank you!",
            },
        },
        {
            "id": "announce",
            "type": "emit",
            "config": {
                "event": "customer.paid",
                "subjects": ["customer:{{ payload.customer_id }}"],
                "context": {"order_id": "{{ payload.order_id }}"},
            },
        },
        {"id": "later", "type": "delay", "config": {"duration": "1d"}},
        {
            "id": "reminder",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "Your order {{ payload.order_id }} is waiting",
                "body": "We have not received your payment yet.",
                "retry": {"max_retries": 5, "base_delay_s": 30},
            },
        },
    ],
    "edges": [
        {"from": "welcome", "to": "paid"},
        {"from": "paid", "to": "thanks", "condition": "vars.wait_paid.received and payload.phone"},
        {"from": "paid", "to": "announce", "condition": "vars.wait_paid.received"},
        {"from": "thanks", "to": "announce"},
        {"from": "paid", "to": "later"},
        {"from": "later", "to": "reminder"},
    ],
}

EXAMPLE_WORKFLOW: dict[str, Any] = {
    "key": "order-follow-up",
    "name": "Order follow-up",
    "is_active": True,
    "definition": EXAMPLE_DEFINITION,
}
