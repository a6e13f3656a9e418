"""Recipients' channel data: push devices (FCM, APNs, Web Push subscriptions) and chat
connections (Slack by bot token or incoming webhook, Microsoft Teams and Discord by
incoming webhook), and the audit of every removal of one. Each index and constraint is
commented on the model (``recipients.models``)."""

import django.db.models.deletion
import notifyflow.ids
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("recipients", "0002_feed_token_generation_sticky_opt_outs"),
    ]

    operations = [
        migrations.CreateModel(
            name="ChannelDataRemoval",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "channel",
                    models.CharField(
                        choices=[("push", "Push device"), ("chat", "Chat connection")], max_length=8
                    ),
                ),
                ("target_id", models.UUIDField()),
                ("provider", models.CharField(max_length=8)),
                ("target", models.CharField(max_length=200)),
                ("reason", models.CharField(max_length=100)),
                ("source", models.CharField(max_length=120)),
                ("details", models.JSONField(blank=True, default=dict)),
                ("at", models.DateTimeField(auto_now_add=True)),
                (
                    "recipient",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="channel_data_removals",
                        to="recipients.recipient",
                    ),
                ),
            ],
            options={
                "verbose_name": "channel data removal",
                "ordering": ["-at", "-id"],
                "indexes": [
                    models.Index(fields=["recipient", "-at"], name="channelremoval_recipient_at")
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("channel__in", ["push", "chat"])),
                        name="channelremoval_channel_valid",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="ChatConnection",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=notifyflow.ids.uuid7,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "provider",
                    models.CharField(
                        choices=[
                            ("slack", "Slack"),
                            ("msteams", "Microsoft Teams"),
                            ("discord", "Discord"),
                        ],
                        max_length=8,
                    ),
                ),
                ("channel", models.CharField(blank=True, max_length=100, null=True)),
                ("user", models.CharField(blank=True, max_length=100, null=True)),
                ("webhook_url", models.CharField(blank=True, max_length=1024, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "recipient",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="chat_connections",
                        to="recipients.recipient",
                    ),
                ),
            ],
            options={
                "verbose_name": "chat connection",
                "ordering": ["recipient_id", "created_at", "id"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("provider__in", ["slack", "msteams", "discord"])),
                        name="chatconnection_provider_valid",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(
                                ("channel__isnull", True),
                                ("user__isnull", True),
                                ("webhook_url__isnull", False),
                            ),
                            models.Q(
                                ("channel__isnull", False),
                                ("provider", "slack"),
                                ("user__isnull", True),
                                ("webhook_url__isnull", True),
                            ),
                            models.Q(
                                ("channel__isnull", True),
                                ("provider", "slack"),
                                ("user__isnull", False),
                                ("webhook_url__isnull", True),
                            ),
                            _connector="OR",
                        ),
                        name="chatconnection_one_form",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("webhook_url__isnull", False)),
                        fields=("recipient", "webhook_url"),
                        name="chatconnection_unique_webhook",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("channel__isnull", False)),
                        fields=("recipient", "channel"),
                        name="chatconnection_unique_channel",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("user__isnull", False)),
                        fields=("recipient", "user"),
                        name="chatconnection_unique_user",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="PushDevice",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=notifyflow.ids.uuid7,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "provider",
                    models.CharField(
                        choices=[
                            ("fcm", "Firebase Cloud Messaging (Android, iOS through Firebase)"),
                            ("apns", "Apple Push Notification service"),
                            ("webpush", "Web Push (a browser's subscription)"),
                        ],
                        max_length=8,
                    ),
                ),
                ("token", models.CharField(max_length=1024)),
                ("keys", models.JSONField(blank=True, null=True)),
                ("locale", models.CharField(blank=True, max_length=35, null=True)),
                ("timezone", models.CharField(blank=True, max_length=64, null=True)),
                ("app", models.CharField(blank=True, max_length=200, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "recipient",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="push_devices",
                        to="recipients.recipient",
                    ),
                ),
            ],
            options={
                "verbose_name": "push device",
                "ordering": ["recipient_id", "created_at", "id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("recipient", "provider", "token"), name="pushdevice_unique_token"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("provider__in", ["fcm", "apns", "webpush"])),
                        name="pushdevice_provider_valid",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("keys__isnull", False), ("provider", "webpush")),
                            models.Q(
                                models.Q(("provider", "webpush"), _negated=True),
                                ("keys__isnull", True),
                            ),
                            _connector="OR",
                        ),
                        name="pushdevice_keys_only_webpush",
                    ),
                ],
            },
        ),
    ]
