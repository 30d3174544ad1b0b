"""Log lines numbered in their attempt's log, and each attempt's first error remembered.

The log page reads a page of a log of any size as a range of line numbers (an index range)
and its "First error" link from the attempt; ingestion keeps both from now on. The lines
stored before are numbered here in the order they came (their ids), and each attempt's
first error is searched for once.
"""

from django.db import migrations, models

# logview.FIRST_ERROR as it was when this migration was written: a migration does not
# change with the code after it.
FIRST_ERROR = (
    r"(Traceback \(most recent call last\)|Error:|\[ERROR\]|\[EXCEPTION\]"
    r"|E[A-Z][0-9][0-9][0-9][0-9]|ERR[0-9][0-9][0-9][0-9][0-9])"
)

# UPDATE … FROM is read alike by PostgreSQL and SQLite (3.33 and later).
NUMBER_LINES = """
    UPDATE {table} SET line_no = numbered.line_no
    FROM (
        SELECT id, ROW_NUMBER() OVER (PARTITION BY run_id, attempt ORDER BY id) AS line_no
        FROM {table} WHERE type = 'log'
    ) AS numbered
    WHERE {table}.id = numbered.id
"""


def number_lines(apps, schema_editor):
    RunEvent = apps.get_model("runs", "RunEvent")
    RunAttempt = apps.get_model("runs", "RunAttempt")
    table = schema_editor.quote_name(RunEvent._meta.db_table)
    schema_editor.execute(NUMBER_LINES.format(table=table))
    for attempt in RunAttempt.objects.only("pk", "run_id", "number").iterator():
        found = (
            RunEvent.objects.filter(
                run_id=attempt.run_id,
                attempt=attempt.number,
                type="log",
                data__line__regex=FIRST_ERROR,
            )
            .order_by("line_no")
            .values_list("line_no", flat=True)
            .first()
        )
        if found is not None:
            RunAttempt.objects.filter(pk=attempt.pk).update(first_error_line=found)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_merge"),
    ]

    operations = [
        migrations.AddField(
            model_name="runevent",
            name="line_no",
            field=models.PositiveBigIntegerField(
                blank=True, help_text="A log line's number in its attempt's log.", null=True
            ),
        ),
        migrations.AddField(
            model_name="runattempt",
            name="first_error_line",
            field=models.PositiveBigIntegerField(
                blank=True,
                help_text="The number of the attempt's first log line that looks like an error.",
                null=True,
            ),
        ),
        migrations.RunPython(number_lines, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="runevent",
            index=models.Index(
                condition=models.Q(("line_no__isnull", False)),
                fields=["run", "attempt", "line_no"],
                name="runevent_log_line",
            ),
        ),
    ]
