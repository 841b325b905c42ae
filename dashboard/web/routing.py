"""Websocket URLs."""

from __future__ import annotations

from django.urls import path

from dashboard.web import consumers

websocket_urlpatterns = [
    path("ws/runs/", consumers.RunsConsumer.as_asgi()),
    path("ws/inbox/", consumers.InboxConsumer.as_asgi()),
    path("ws/runs/<uuid:run_id>/", consumers.RunConsumer.as_asgi()),
]
