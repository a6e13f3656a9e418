"""Every URL the API app answers: ``/api/v1/``, the schema and its docs pages, the
health and metrics endpoints, and the providers' status webhooks. Mounted at the root
by ``notifyflow.urls`` (the names are global: ``reverse("trigger-list")``)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from feed.services import ACTIONS as FEED_ACTIONS

from .views import (
    batches,
    channel_data,
    events,
    feed,
    health,
    lists,
    recipients,
    step_logs,
    throttles,
    translations,
    triggers,
    webhook_endpoints,
    webhooks,
    workflow_sync,
    workflow_triggers,
    workflow_versions,
    workflows,
)

v1 = [
    # The in-app feed: recipient tokens, not API keys. First: counts/ is
    # polled by every open page, and the resolver tries the patterns in order.
    path("feed/", feed.FeedListView.as_view(), name="feed-list"),
    path("feed/counts/", feed.FeedCountsView.as_view(), name="feed-counts"),
    path("feed/bulk/", feed.FeedBulkView.as_view(), name="feed-bulk"),
    *(
        path(
            f"feed/<uuid:id>/{action}/",
            feed.FeedItemActionView.as_view(feed_action=action),
            name=f"feed-{action}",
        )
        for action in FEED_ACTIONS
    ),
    path("triggers/", triggers.TriggerListCreateView.as_view(), name="trigger-list"),
    path(
        "triggers/cancel/",
        triggers.TriggerCancelByKeyView.as_view(),
        name="trigger-cancel-by-key",
    ),
    path("triggers/bulk/", triggers.TriggerBulkCreateView.as_view(), name="trigger-bulk-create"),
    path("triggers/<uuid:id>/", triggers.TriggerDetailView.as_view(), name="trigger-detail"),
    path("triggers/<uuid:id>/cancel/", triggers.TriggerCancelView.as_view(), name="trigger-cancel"),
    path("triggers/<uuid:id>/events/", triggers.InstanceEventView.as_view(), name="trigger-events"),
    path("triggers/<uuid:id>/retry/", triggers.TriggerRetryView.as_view(), name="trigger-retry"),
    path(
        "triggers/<uuid:id>/run-now/",
        triggers.TriggerRunNowView.as_view(),
        name="trigger-run-now",
    ),
    path("triggers/<uuid:id>/steps/", triggers.TriggerStepsView.as_view(), name="trigger-steps"),
    path(
        "triggers/<uuid:id>/timeline/",
        triggers.TriggerTimelineView.as_view(),
        name="trigger-timeline",
    ),
    path(
        "triggers/<uuid:id>/deliveries/",
        triggers.TriggerDeliveriesView.as_view(),
        name="trigger-deliveries",
    ),
    path("fanouts/<uuid:id>/", triggers.FanOutDetailView.as_view(), name="fanout-detail"),
    path("step-logs/", step_logs.StepLogListView.as_view(), name="step-log-list"),
    path("throttles/", throttles.ThrottleListView.as_view(), name="throttle-list"),
    path("translations/", translations.TranslationListView.as_view(), name="translation-list"),
    path(
        "translations/<str:locale>/<str:namespace>/",
        translations.TranslationDetailView.as_view(),
        name="translation-detail",
    ),
    path("workflows/", workflows.WorkflowListCreateView.as_view(), name="workflow-list"),
    # Before <slug:key>/: a workflow keyed "sync" is read and replaced through the
    # list and the console, not at this path (its sub-paths are its own).
    path("workflows/sync/", workflow_sync.WorkflowSyncView.as_view(), name="workflow-sync"),
    path("workflows/<slug:key>/", workflows.WorkflowDetailView.as_view(), name="workflow-detail"),
    path(
        "workflows/<slug:key>/diagram/",
        workflows.WorkflowDiagramView.as_view(),
        name="workflow-diagram",
    ),
    path(
        "workflows/<slug:key>/stats/", workflows.WorkflowStatsView.as_view(), name="workflow-stats"
    ),
    path(
        "workflows/<slug:key>/preview/",
        workflows.WorkflowPreviewView.as_view(),
        name="workflow-preview",
    ),
    path(
        "workflows/<slug:key>/test/",
        workflows.WorkflowTestSendView.as_view(),
        name="workflow-test-send",
    ),
    path(
        "workflows/<slug:key>/pause/",
        workflows.WorkflowPauseView.as_view(pause=True),
        name="workflow-pause",
    ),
    path(
        "workflows/<slug:key>/resume/",
        workflows.WorkflowPauseView.as_view(pause=False),
        name="workflow-resume",
    ),
    path(
        "workflows/<slug:key>/versions/",
        workflow_versions.WorkflowVersionListView.as_view(),
        name="workflow-version-list",
    ),
    path(
        "workflows/<slug:key>/versions/<int:version>/",
        workflow_versions.WorkflowVersionDetailView.as_view(),
        name="workflow-version-detail",
    ),
    path(
        "workflows/<slug:key>/versions/<int:version>/diff/",
        workflow_versions.WorkflowVersionDiffView.as_view(),
        name="workflow-version-diff",
    ),
    path(
        "workflows/<slug:key>/versions/<int:version>/restore/",
        workflow_versions.WorkflowVersionRestoreView.as_view(),
        name="workflow-version-restore",
    ),
    path("events/", events.EventReceiveView.as_view(), name="event-receive"),
    path("recipients/", recipients.RecipientListView.as_view(), name="recipient-list"),
    # Before <id>/: a recipient whose id is "bulk" cannot be addressed by path.
    path("recipients/bulk/", recipients.RecipientBulkView.as_view(), name="recipient-bulk"),
    path("recipients/<str:id>/", recipients.RecipientDetailView.as_view(), name="recipient-detail"),
    path(
        "recipients/<str:id>/preferences/",
        recipients.RecipientPreferencesView.as_view(),
        name="recipient-preferences",
    ),
    path(
        "recipients/<str:id>/preferences/evaluate/",
        recipients.RecipientPreferencesEvaluateView.as_view(),
        name="recipient-preferences-evaluate",
    ),
    # Channel data: push devices and chat connections (docs/api.md#channel-data).
    path(
        "recipients/<str:id>/channel-data/push/",
        channel_data.PushChannelDataView.as_view(),
        name="recipient-channel-data-push",
    ),
    path(
        "recipients/<str:id>/channel-data/chat/",
        channel_data.ChatChannelDataView.as_view(),
        name="recipient-channel-data-chat",
    ),
    path(
        "recipients/<str:id>/channel-data/push/devices/",
        channel_data.PushDeviceListView.as_view(),
        name="recipient-push-devices",
    ),
    path(
        "recipients/<str:id>/channel-data/push/devices/<uuid:device_id>/",
        channel_data.PushDeviceDetailView.as_view(),
        name="recipient-push-device",
    ),
    path(
        "recipients/<str:id>/feed-token/",
        recipients.RecipientFeedTokenView.as_view(),
        name="recipient-feed-token",
    ),
    path(
        "recipients/<str:id>/feed-token/revoke/",
        recipients.RecipientFeedTokenRevokeView.as_view(),
        name="recipient-feed-token-revoke",
    ),
    path("lists/", lists.ListListView.as_view(), name="list-list"),
    path("lists/<slug:key>/", lists.ListDetailView.as_view(), name="list-detail"),
    path("lists/<slug:key>/members/", lists.ListMembersView.as_view(), name="list-members"),
    path(
        "workflow-triggers/",
        workflow_triggers.WorkflowTriggerListCreateView.as_view(),
        name="workflow-trigger-list",
    ),
    path(
        "workflow-triggers/<int:id>/",
        workflow_triggers.WorkflowTriggerDetailView.as_view(),
        name="workflow-trigger-detail",
    ),
    path(
        "workflow-triggers/<int:id>/preview-key/",
        workflow_triggers.WorkflowTriggerPreviewKeyView.as_view(),
        name="workflow-trigger-preview-key",
    ),
    # Gates: batches and throttle counters.
    path("batches/", batches.BatchListView.as_view(), name="batch-list"),
    path("batches/<uuid:id>/", batches.BatchDetailView.as_view(), name="batch-detail"),
    path("batches/<uuid:id>/flush/", batches.BatchFlushView.as_view(), name="batch-flush"),
    # Status webhooks: the customer's endpoints (docs/api.md#status-webhooks).
    path(
        "webhook-endpoints/",
        webhook_endpoints.WebhookEndpointListCreateView.as_view(),
        name="webhook-endpoint-list",
    ),
    path(
        "webhook-endpoints/<uuid:id>/",
        webhook_endpoints.WebhookEndpointDetailView.as_view(),
        name="webhook-endpoint-detail",
    ),
    path(
        "webhook-endpoints/<uuid:id>/rotate-secret/",
        webhook_endpoints.WebhookEndpointRotateView.as_view(),
        name="webhook-endpoint-rotate-secret",
    ),
    path(
        "webhook-endpoints/<uuid:id>/replay/",
        webhook_endpoints.WebhookEndpointReplayView.as_view(),
        name="webhook-endpoint-replay",
    ),
    path(
        "webhook-endpoints/<uuid:id>/messages/",
        webhook_endpoints.WebhookEndpointMessagesView.as_view(),
        name="webhook-endpoint-messages",
    ),
]

urlpatterns = [
    path("api/v1/", include(v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics_view, name="metrics"),
    # Delivery status from the providers: anymail's tracking webhooks (basic auth / ESP
    # signatures per ANYMAIL settings) and Twilio's signed status callback.
    path("webhooks/anymail/", include("anymail.urls")),
    path(
        "webhooks/twilio/status/",
        webhooks.twilio_status_callback,
        name="twilio-status-callback",
    ),
]
