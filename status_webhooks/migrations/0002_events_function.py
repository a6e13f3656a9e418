"""The outbox's write inside a state transition's one statement (PostgreSQL, PL/pgSQL so
its plan is cached per connection): ``notifyflow_webhook_events``, called by
``triggers.state.postgres.status_events_sql`` only when some endpoint is active, so a
step pays one look at the (empty) endpoint table when nobody subscribes instead of
planning and opening the outbox's tables. It writes the
events of ONE instance whose flag is true: the instance's sequence moves once by the
number of events some endpoint wants, which take the numbers in the order given, and
each becomes one message per endpoint that wants it (its type, or ``delivery.*`` for
a delivery status; its workflow, or every workflow). SQLite writes through
``outbox.record`` instead."""

from django.db import migrations

from notifyflow import db

UUID7 = (
    "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
    " substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint)"
    " from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid"
)


def _match(alias: str) -> str:
    return (
        f"e.is_active AND (jsonb_exists(e.event_types, {alias}.type)"
        f" OR (left({alias}.type, 9) = 'delivery.' AND jsonb_exists(e.event_types, 'delivery.*')))"
        " AND (e.workflows = '[]'::jsonb OR p_workflow = '' OR jsonb_exists(e.workflows, p_workflow))"
    )


FUNCTION = f"""
CREATE OR REPLACE FUNCTION notifyflow_webhook_events(
    p_instance uuid, p_workflow text, p_at timestamptz, p_events jsonb, p_applies boolean[]
) RETURNS integer AS $$
DECLARE
    written_count integer;
BEGIN
WITH wanted AS MATERIALIZED (
    SELECT ev.type, ev.data, {UUID7} AS event_id,
           row_number() OVER (ORDER BY ev.ord) AS rank, count(*) OVER () AS total
    FROM (
        SELECT item ->> 'type' AS type, item -> 'data' AS data, ord
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS x(item, ord)
    ) ev
    WHERE p_applies[ev.ord]
      AND EXISTS (SELECT 1 FROM status_webhooks_webhookendpoint e WHERE {_match("ev")})
), reserved AS (
    INSERT INTO status_webhooks_instancesequence (instance_id, last)
    SELECT p_instance, count(*) FROM wanted HAVING count(*) > 0
    ON CONFLICT (instance_id)
    DO UPDATE SET last = status_webhooks_instancesequence.last + EXCLUDED.last
    RETURNING last
), written AS (
    INSERT INTO status_webhooks_webhookmessage (
        id, endpoint_id, event_id, type, instance_id, sequence, workflow_key, data,
        created_at, status, attempts, next_attempt_at, last_error)
    SELECT {UUID7}, e.id, w.event_id, w.type, p_instance, s.last - w.total + w.rank,
           p_workflow, w.data || jsonb_build_object('sequence', s.last - w.total + w.rank),
           p_at, 'pending', 0, p_at, ''
    FROM wanted w CROSS JOIN reserved s JOIN status_webhooks_webhookendpoint e
      ON {_match("w")}
    RETURNING 1
)
SELECT count(*)::integer INTO written_count FROM written;
RETURN written_count;
END;
$$ LANGUAGE plpgsql VOLATILE;
"""


def install(apps, schema_editor):
    if db.is_postgres(schema_editor.connection):
        schema_editor.execute(FUNCTION.replace("%", "%%"), params=[])


def uninstall(apps, schema_editor):
    if db.is_postgres(schema_editor.connection):
        schema_editor.execute(
            "DROP FUNCTION IF EXISTS notifyflow_webhook_events("
            "uuid, text, timestamptz, jsonb, boolean[])",
            params=[],
        )


class Migration(migrations.Migration):
    dependencies = [("status_webhooks", "0001_initial")]

    operations = [migrations.RunPython(install, uninstall)]
