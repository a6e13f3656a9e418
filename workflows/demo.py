"""The demo workflow that ``make run`` loads: email -> wait 10 s -> SMS."""

DEMO_KEY = "welcome-demo"
DEMO_DEFINITION = {
    "entry_node_id": "welcome_email",
    "nodes": [
        {
            "id": "welcome_email",
            "type": "email",
            "config": {
                "to": "{{ payload.email }}",
                "subject": "Welcome, {{ payload.name }}!",
                "body": "Hi {{ payload.name }},\n\nThanks for signing up ({{ workflow.key }} "
                "v{{ workflow.version }}).",
                "html_body": "<p>Hi <b>{{ payload.name }}</b>, thanks for signing up.</p>",
            },
        },
        {"id": "wait", "type": "delay", "config": {"duration": "10s"}},
        {
            "id": "welcome_sms",
            "type": "sms",
            "config": {
                "to": "{{ payload.phone }}",
                "body": "Hi {{ payload.name }}, your welcome email went out "
                "(id {{ vars.email_welcome_email.message_id }}).",
            },
        },
    ],
    "edges": [
        {"from": "welcome_email", "to": "wait"},
        {"from": "wait", "to": "welcome_sms", "condition": "payload.phone"},
    ],
}
DEMO_PAYLOAD = {"name": "Ada", "email": "ada@example.com", "phone": "+15005550006"}
