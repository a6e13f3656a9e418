"""Scenario 41's chat groups (issue 44 item 5): what a ``chat`` step costs next to the
``email`` step, in the same alternating run as the push groups (``bench.scenarios.push``),
through the real clients to the chat fakes in the fakes' own process
(``bench.push_fakes``, behind TLS as the services are):

- **slack**: one chat node (provider ``slack``, text and one Block Kit section) to the
  recipient's one Slack channel connection: ``chat.postMessage`` with the bot token,
  ``slack_sdk``'s ``WebClient`` (urllib: a new TLS connection per call);
- **teams**: one chat node (provider ``msteams``) to the recipient's one Teams incoming
  webhook: an Adaptive Card POSTed by the kept-alive httpx client.

Reported against the email step (wall and CPU medians, same run); no target of its own.
"""

from __future__ import annotations

import uuid
from typing import Any

from bench.scenarios.common import Ctx, ms
from bench.scenarios.in_process import due_instances
from recipients.models import ChatConnection, ChatProvider, Recipient
from workflows.models import Workflow
from workflows.services import workflow_save

CHAT_GROUPS = ("slack", "teams")
PROVIDER = {"slack": ChatProvider.SLACK, "teams": ChatProvider.MSTEAMS}
TEXT = "Order {{ payload.order }} shipped, arriving {{ payload.eta }}"
CONFIGS: dict[str, dict[str, Any]] = {
    "slack": {
        "provider": "slack",
        "text": TEXT,
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": "*Order {{ payload.order }}* shipped"},
            }
        ],
    },
    "teams": {"provider": "msteams", "text": TEXT},
}


def chat_workflows() -> dict[str, Workflow]:
    """A one-node chat workflow per chat group."""
    flows = {}
    for group, config in CONFIGS.items():
        key = f"bench-chat-{group}-vs"
        node = {"id": "send", "type": "chat", "config": config}
        definition = {"entry_node_id": "send", "nodes": [node], "edges": []}
        flows[group] = workflow_save(key=key, name=key, definition=definition, actor="bench")
    return flows


def chat_instances(
    chat: dict[str, str], flow: Workflow, group: str, n: int, tag: str, payload: dict[str, Any]
) -> list[uuid.UUID]:
    """``n`` people with one chat connection each (the fakes' Slack channel, or their
    Teams webhook: ``chat`` as ``bench.push_fakes`` announced it), an instance each due
    at the chat node."""
    people = [Recipient(id=f"{tag}-{group}-{i}") for i in range(n)]
    Recipient.objects.bulk_create(people, batch_size=1000)
    if group == "slack":
        rows = [
            ChatConnection(recipient=p, provider=PROVIDER[group], channel=chat["slack_channel"])
            for p in people
        ]
    else:
        rows = [
            ChatConnection(
                recipient=p, provider=PROVIDER[group], webhook_url=chat["msteams_webhook"]
            )
            for p in people
        ]
    ChatConnection.objects.bulk_create(rows, batch_size=1000)
    return due_instances(flow, people, key_prefix=f"{tag}-{group}", node_id="send", payload=payload)


def chat_rows(ctx: Ctx, result: dict[str, Any], seen: dict[str, Any]) -> None:
    """The chat groups' rows of scenario 41: wall median and its ratio to the email
    step's, CPU medians, queries, connections; ratios kept in ``result``."""
    wall, cpu = result["wall_median_s"], result["cpu_median_s"]
    opened = result["connections_opened_while_measured"]
    accepted, received = seen.get("tls_connections", {}), seen.get("received", {})
    steps = result["steps_per_group"]
    what = {
        "slack": "chat step, 1 Slack channel (slack_sdk chat.postMessage, TLS)",
        "teams": "chat step, 1 Teams webhook (httpx, kept-alive TLS)",
    }
    provider = {"slack": "slack", "teams": "msteams"}
    for group in CHAT_GROUPS:
        ratio = wall[group] / wall["email"]
        cpu_ratio = cpu[group] / cpu["email"]
        result[f"ratio_{group}_to_email"] = ratio
        result[f"cpu_ratio_{group}_to_email"] = cpu_ratio
        name = provider[group]
        ctx.row(
            "41 chat",
            f"{what[group]}, wall median",
            ms(wall[group]),
            f"email step {ms(wall['email'])}, same run",
            "",
            f"{ratio:.2f}x",
        )
        ctx.row(
            "41 chat",
            f"{group}: CPU median / email's",
            f"{ms(cpu[group])} / {ms(cpu['email'])}",
            f"queries/step {result['queries_per_step'][group]:.1f}",
            "",
            f"{cpu_ratio:.2f}x CPU",
        )
        ctx.row(
            "41 chat",
            f"{group}: connections opened over {steps} steps",
            str(opened.get(name)),
            f"the fake accepted (TLS): {accepted.get(name)}, messages {received.get(name)}",
        )
