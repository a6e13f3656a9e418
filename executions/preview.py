"""Preview: what a payload would make a workflow do, with nothing sent and
nothing written.

Walks the path from the entry node as the engine would: each node's fields are rendered
(``rendered``), its type's preview runs (``NodeType.preview``, else its run in preview
mode: the delivery guard sends nothing and writes no delivery row; a wait reads no inbox
and takes its timeout branch), its output becomes ``vars.<type>_<node>`` (with its
``note``, if any) and the edges are evaluated against it. Stops at the end
of the path or at the first node that fails to render (``error``); a template that hits
a resource limit is a 400 ``template_limit`` instead.

For a chosen recipient (``recipient_id``) every node renders with their address, locale
and properties, push and chat nodes list their devices and connections, and each node
says what it would do for them (``recipient``: ``executions.preview_recipient``).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from django.utils import timezone

from notifyflow.errors import ApplicationError, NotFoundError
from translations.locales import locale_check
from triggers.models import TriggerInstance
from workflows.definition import node_by_id, node_types
from workflows.models import Workflow, WorkflowVersion
from workflows.templating import TemplateError, TemplateLimitError, render

from .engine import choose_next_node
from .locales import TRANSLATIONS_VAR, locale_scope, send_locale
from .preview_recipient import preview_audience, recipient_outcome, unsubscribe_link
from .providers.base import ProviderError
from .step import NO_AUDIENCE, NO_RECIPIENT, StepContext

PREVIEW_INSTANCE = uuid.UUID(int=0)


def _render_value(value: Any, context: dict[str, Any], path: str, html: bool = False) -> Any:
    if isinstance(value, str):
        try:
            return render(value, context, html=html)
        except TemplateError as exc:
            raise ProviderError(f"{path}: template error: {exc}", permanent=True) from exc
    if isinstance(value, list):
        return [_render_value(v, context, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _render_value(v, context, f"{path}.{k}") for k, v in value.items()}
    return value


def render_fields(node: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """Every field of the node's config, its templates rendered (others as written)."""
    node_type = node_types.find(node["type"])
    spec = node_type.fields if node_type is not None else {}
    rendered = {}
    for key, value in node["config"].items():
        field = spec.get(key)
        if field is not None and field.is_template:
            rendered[key] = _render_value(value, context, key, html=field.kind == "html_template")
        else:
            rendered[key] = value
    return rendered


def _version(key: str, number: int | None) -> tuple[Workflow, WorkflowVersion]:
    workflow = Workflow.objects.select_related("current_version").filter(key=key).first()
    if workflow is None:
        raise NotFoundError(code="not_found", field="key", message=f"no workflow {key!r}")
    if number is None:
        if workflow.current_version is None:
            raise ApplicationError(
                code="workflow_has_no_definition",
                field="key",
                message=f"workflow {key!r} has no definition",
            )
        return workflow, workflow.current_version
    version = WorkflowVersion.objects.filter(workflow=workflow, version=number).first()
    if version is None:
        raise NotFoundError(
            code="not_found", field="version", message=f"version: {key!r} has no version {number}"
        )
    return workflow, version


def workflow_preview(
    *,
    key: str,
    payload: dict[str, Any],
    version: int | None = None,
    recipient_id: str | None = None,
    locale: str | None = None,
) -> dict[str, Any]:
    """``{workflow, version, path, nodes: [{node_id, type, rendered, output, error,
    note}]}``; with ``recipient_id`` also ``recipient`` (what templates see of them) and
    each node's ``recipient`` (what it would do for them). ``locale`` renders in that
    locale, else as a send would choose (``executions.locales``); the answer says which
    (``locale``) and the keys it lacked (``translation_missing``). NotFoundError for an
    unknown workflow, version or recipient; 400 ``invalid_locale``; ApplicationError
    ``template_limit`` when a template hits a resource limit. Sends and writes nothing."""
    workflow, pinned = _version(key, version)
    definition = pinned.definition
    now = timezone.now()
    person = (
        NO_AUDIENCE
        if recipient_id is None
        else preview_audience(recipient_id=recipient_id, workflow=workflow)
    )
    context: dict[str, Any] = {
        "payload": payload,
        "trigger": {
            "id": "preview",
            "idempotency_key": "preview",
            "created_at": now.isoformat(),
            "attempts": 0,
        },
        "workflow": {"key": workflow.key, "name": workflow.name, "version": pinned.version},
        "vars": {},
        "now": now.isoformat(),
        "recipient": person.recipient.as_context() if person.recipient else NO_RECIPIENT,
        "unsubscribe_url": unsubscribe_link(person, workflow_key=workflow.key),
    }
    if locale is not None:
        locale_check(locale)
    person = replace(person, default_locale=workflow.default_locale)
    chosen = send_locale(person, locale)
    context.update(locale_scope(person, workflow_key=workflow.key, locale=chosen))
    # What a node may read of its instance: none parked, nothing run yet.
    instance = TriggerInstance(pk=PREVIEW_INSTANCE, workflow=workflow, payload=payload, vars={})
    path: list[str] = []
    nodes: list[dict[str, Any]] = []
    node_id: str | None = definition["entry_node_id"]
    while node_id is not None and len(path) < len(definition["nodes"]):
        node = node_by_id(definition, node_id)
        path.append(node_id)
        entry: dict[str, Any] = {
            "node_id": node_id,
            "type": node["type"],
            "rendered": None,
            "output": None,
            "error": None,
        }
        nodes.append(entry)
        try:
            entry["rendered"] = render_fields(node, context)
            step = StepContext(
                instance=instance,
                node_id=node_id,
                node_type=node["type"],
                config=node["config"],
                context=context,
                now=now,
                workflow_key=workflow.key,
                preview=True,
                audience=person,
            )
            node_type = node_types.get(node["type"])
            result = (node_type.preview or node_type.run)(step)
            output = result.output
            if result.note:
                entry["note"] = result.note
            entry["output"] = output
            if person.recipient is not None:
                entry["recipient"] = recipient_outcome(step)
            if result.vars_key:
                context["vars"] = {**context["vars"], result.vars_key: output}
            node_id = choose_next_node(definition, node_id, context)
        except (ProviderError, TemplateError) as exc:
            if _hit_a_limit(exc):
                # Not a result to show: the payload asked this process for more than a
                # template may use (the worker would fail the instance permanently).
                raise ApplicationError(
                    code="template_limit",
                    field="payload",
                    message=f"payload: node {node_id}: {exc}",
                ) from exc
            entry["error"] = str(exc)
            break
    answer = {"workflow": workflow.key, "version": pinned.version, "path": path, "nodes": nodes}
    answer["locale"] = chosen
    answer["translation_missing"] = list(context[TRANSLATIONS_VAR].missing)
    if person.recipient is not None:
        answer["recipient"] = context["recipient"]
    return answer


def _hit_a_limit(exc: BaseException | None) -> bool:
    """Whether ``exc`` is, or was raised from, a template's resource limit."""
    while exc is not None:
        if isinstance(exc, TemplateLimitError):
            return True
        exc = exc.__cause__
    return False
