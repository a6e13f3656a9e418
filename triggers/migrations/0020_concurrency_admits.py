"""The claim's concurrency check on PostgreSQL: ``notifyflow_concurrency_admits``.

The claim's UPDATE calls it for an instance with a concurrency key. It takes a
transaction-scoped advisory lock on (workflow, key) and only then counts the executing
steps: two claims of the same key run one after the other, and the second one's count
sees the first one's row. That is what VOLATILE buys: each statement inside a VOLATILE
function takes a new snapshot (READ COMMITTED), taken after the lock was granted, so it
sees the claim that held the lock and committed. (STABLE would reuse the calling
statement's snapshot, taken before the wait: both would count the same and both admit.)
The lock is held until the claim's transaction ends: the claim is one autocommit
statement, so until it commits. The limit is the workflow's current one: lowering it
takes effect at the next claim, raising it too; no limit admits.

The count reads the partial index ``trigger_concurrency_running`` and stops at the limit.
SQLite has no such function; ``triggers.state.orm.claim`` applies the same rule.
"""

from django.db import migrations

from notifyflow import db

CREATE = """
CREATE OR REPLACE FUNCTION notifyflow_concurrency_admits(p_workflow bigint, p_key text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_limit integer;
    v_running integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, p_workflow));
    SELECT concurrency_limit INTO v_limit FROM workflows_workflow WHERE id = p_workflow;
    IF v_limit IS NULL THEN
        RETURN true;
    END IF;
    SELECT count(*) INTO v_running FROM (
        SELECT 1 FROM triggers_triggerinstance
        WHERE workflow_id = p_workflow AND concurrency_key = p_key AND status = 'processing'
        LIMIT v_limit
    ) AS running;
    RETURN v_running < v_limit;
END
$$
"""

DROP = "DROP FUNCTION IF EXISTS notifyflow_concurrency_admits(bigint, text)"


def create(apps, schema_editor):
    if db.is_postgres(schema_editor.connection):
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if db.is_postgres(schema_editor.connection):
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("triggers", "0019_instance_lane_concurrency"),
    ]

    operations = [migrations.RunPython(create, drop)]
