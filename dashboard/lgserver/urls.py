"""``/langgraph/``: the paths of LangGraph's server API (no trailing slashes, as clients send)."""

from __future__ import annotations

from django.urls import path, re_path
from drf_spectacular.views import SpectacularJSONAPIView

from dashboard.lgserver import assistants as a
from dashboard.lgserver import cancel, openapi, state
from dashboard.lgserver import crons as c
from dashboard.lgserver import stateless as sl
from dashboard.lgserver import store as st
from dashboard.lgserver import subgraphs as sg
from dashboard.lgserver import views as v

app_name = "langgraph"

T = "threads/<str:thread_id>"
R = f"{T}/runs/<str:run_id>"

urlpatterns = [
    path("info", v.InfoView.as_view(), name="info"),
    path("openapi.json", SpectacularJSONAPIView.as_view(
        custom_settings=openapi.SETTINGS,
        authentication_classes=v.LangGraphView.authentication_classes),
        name="openapi"),
    path("assistants", a.AssistantsView.as_view(), name="assistants"),
    path("assistants/search", a.AssistantSearchView.as_view(), name="assistant-search"),
    path("assistants/count", a.AssistantCountView.as_view(), name="assistant-count"),
    path("assistants/<str:assistant_id>", a.AssistantView.as_view(), name="assistant"),
    path("assistants/<str:assistant_id>/versions", a.AssistantVersionsView.as_view(),
         name="assistant-versions"),
    path("assistants/<str:assistant_id>/latest", a.AssistantLatestView.as_view(),
         name="assistant-latest"),
    path("assistants/<str:assistant_id>/graph", v.AssistantGraphView.as_view(),
         name="assistant-graph"),
    path("assistants/<str:assistant_id>/schemas", v.AssistantSchemasView.as_view(),
         name="assistant-schemas"),
    path("assistants/<str:assistant_id>/subgraphs", sg.AssistantSubgraphsView.as_view(),
         name="assistant-subgraphs"),
    path("assistants/<str:assistant_id>/subgraphs/<str:namespace>",
         sg.AssistantSubgraphsView.as_view(), name="assistant-subgraphs-at"),
    path("threads", v.ThreadsView.as_view(), name="threads"),
    path("threads/search", v.ThreadSearchView.as_view(), name="thread-search"),
    path(T, cancel.thread, name="thread"),
    path(f"{T}/state", state.ThreadStateView.as_view(), name="thread-state"),
    path(f"{T}/state/checkpoint", state.ThreadStateCheckpointView.as_view(),
         name="thread-state-checkpoint"),
    path(f"{T}/state/<str:checkpoint_id>", state.ThreadStateAtView.as_view(),
         name="thread-state-at"),
    path(f"{T}/history", v.ThreadHistoryView.as_view(), name="thread-history"),
    path(f"{T}/runs", v.RunsView.as_view(), name="runs"),
    path(f"{T}/runs/crons", c.ThreadCronsView.as_view(), name="thread-crons"),
    path(f"{T}/runs/stream", v.RunStreamView.as_view(), name="run-stream"),
    path(f"{T}/runs/wait", v.RunWaitView.as_view(), name="run-wait"),
    path(R, v.RunView.as_view(), name="run"),
    path(f"{R}/join", v.RunJoinView.as_view(), name="run-join"),
    path(f"{R}/stream", v.RunJoinStreamView.as_view(), name="run-join-stream"),
    path(f"{R}/cancel", cancel.run_cancel, name="run-cancel"),
    path("runs/cancel", cancel.RunsCancelView.as_view(), name="runs-cancel"),
    path("runs/crons", c.CronsView.as_view(), name="crons"),
    path("runs/crons/search", c.CronSearchView.as_view(), name="cron-search"),
    path("runs/crons/count", c.CronCountView.as_view(), name="cron-count"),
    path("runs/crons/<str:cron_id>", c.CronView.as_view(), name="cron"),
    # stateless runs: each on a temporary thread, deleted once it stops (unless kept)
    path("runs", sl.StatelessRunsView.as_view(), name="stateless-runs"),
    path("runs/stream", sl.StatelessRunStreamView.as_view(), name="stateless-run-stream"),
    path("runs/wait", sl.StatelessRunWaitView.as_view(), name="stateless-run-wait"),
    path("store/items", st.StoreItemsView.as_view(), name="store-items"),
    path("store/items/search", st.StoreSearchView.as_view(), name="store-search"),
    path("store/namespaces", st.StoreNamespacesView.as_view(), name="store-namespaces"),
    re_path(r"^.*$", v.NotServedView.as_view(), name="not-served"),
]
