"""Recipients' feed-token generation (revocable feed tokens) and the
opt-out audit's action and longer source (sticky opt-outs: a reversal is a row, and an
API write names its key, ``api:<key name>``).

Existing recipients get generation 0, the generation of the tokens minted before this
(they carry none), so those keep working until they expire; recipients created from
now on get a random one. Existing audit rows are opt-outs."""

from django.db import migrations, models

import recipients.models


class Migration(migrations.Migration):
    dependencies = [("recipients", "0001_recipients")]

    operations = [
        migrations.AddField(
            model_name="recipient",
            name="feed_token_generation",
            field=models.BigIntegerField(default=0, editable=False),
        ),
        migrations.AlterField(
            model_name="recipient",
            name="feed_token_generation",
            field=models.BigIntegerField(
                default=recipients.models.new_token_generation, editable=False
            ),
        ),
        migrations.AlterField(
            model_name="optout",
            name="source",
            field=models.CharField(max_length=120),
        ),
        migrations.AddField(
            model_name="optout",
            name="action",
            field=models.CharField(
                choices=[("opt_out", "Opted out"), ("resubscribe", "Resubscribed")],
                db_default="opt_out",
                default="opt_out",
                max_length=16,
            ),
        ),
    ]
