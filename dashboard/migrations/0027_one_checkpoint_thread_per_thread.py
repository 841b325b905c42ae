"""One LangGraph checkpoint thread per thread (issue 41): each run's checkpoints move from
its own checkpoint thread (``<run>:planner``) to its thread's (the thread's id), each
checkpoint's metadata naming the run (``run_id``, as LangGraph's server writes it).

The copies a run made of the checkpoint it went on from (same id, ``source: "fork"``, no
parent) are dropped when the original is a checkpoint of the same thread: the run's first
checkpoint already names the original as its parent, so the thread's history is one tree
without them. A copy from another thread's run (a fork made from the pages) stays: it is
the new thread's root.
"""

import json

from django.db import migrations, models


def _copies(cursor, vendor, old, sources, new):
    """Ids of the root checkpoints of checkpoint thread ``old`` copied from ``sources``
    whose original is still there (in its own thread, or moved into ``new``)."""
    cursor.execute("SELECT checkpoint_id, metadata FROM checkpoints WHERE thread_id = %s "
                   "AND checkpoint_ns = '' AND parent_checkpoint_id IS NULL", [old])
    found = []
    for checkpoint_id, metadata in cursor.fetchall():
        if isinstance(metadata, (bytes, memoryview)):
            metadata = bytes(metadata).decode("utf-8", "replace")
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata)
            except ValueError:
                continue
        source = (metadata or {}).get("forked_from")
        if (metadata or {}).get("source") == "fork" and isinstance(source, dict) \
                and source.get("thread_id") in sources:
            cursor.execute("SELECT 1 FROM checkpoints WHERE thread_id IN (%s, %s) AND "
                           "checkpoint_ns = '' AND checkpoint_id = %s",
                           [source["thread_id"], new, checkpoint_id])
            if cursor.fetchone() is not None:
                found.append(checkpoint_id)
    return found


def _move(cursor, vendor, old, new, run_id):
    """Move checkpoint thread ``old`` into ``new``, naming ``run_id`` in the metadata."""
    if vendor == "postgresql":
        cursor.execute("UPDATE checkpoints SET thread_id = %s, metadata = metadata || "
                       "jsonb_build_object('run_id', %s::text) WHERE thread_id = %s",
                       [new, run_id, old])
        cursor.execute("UPDATE checkpoint_writes SET thread_id = %s WHERE thread_id = %s",
                       [new, old])
        # a copy's blobs are the original's (same channel, version and value)
        cursor.execute("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, "
                       "version, type, blob) SELECT %s, checkpoint_ns, channel, version, "
                       "type, blob FROM checkpoint_blobs WHERE thread_id = %s "
                       "ON CONFLICT DO NOTHING", [new, old])
        cursor.execute("DELETE FROM checkpoint_blobs WHERE thread_id = %s", [old])
    else:
        cursor.execute("UPDATE checkpoints SET thread_id = %s, metadata = CAST(json_set("
                       "CAST(metadata AS TEXT), '$.run_id', %s) AS BLOB) WHERE thread_id = %s",
                       [new, run_id, old])
        cursor.execute("UPDATE writes SET thread_id = %s WHERE thread_id = %s", [new, old])


def one_thread(apps, schema_editor):
    """Every run's checkpoints into its thread's checkpoint thread."""
    Run = apps.get_model("dashboard", "Run")
    connection = schema_editor.connection
    vendor = connection.vendor
    writes = "checkpoint_writes" if vendor == "postgresql" else "writes"
    runs = list(Run.objects.filter(conversation__isnull=False).order_by("created_at")
                .values_list("id", "thread_id", "conversation_id"))
    by_thread = {}
    for _run_id, old, conversation in runs:
        by_thread.setdefault(conversation, set()).add(old)
    with connection.cursor() as cursor:
        for run_id, old, conversation in runs:
            new = str(conversation)
            if old == new:
                continue
            copies = _copies(cursor, vendor, old, by_thread[conversation] - {old}, new)
            for checkpoint_id in copies:
                for table in ("checkpoints", writes):
                    cursor.execute(f"DELETE FROM {table} WHERE thread_id = %s AND "
                                   "checkpoint_ns = '' AND checkpoint_id = %s",
                                   [old, checkpoint_id])
            _move(cursor, vendor, old, new, str(run_id))
            Run.objects.filter(id=run_id).update(thread_id=new)


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0026_merge_event_at"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="thread_id",
            field=models.CharField(db_index=True, max_length=200),
        ),
        migrations.RunPython(one_thread, migrations.RunPython.noop),
    ]
