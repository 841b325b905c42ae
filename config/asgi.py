"""ASGI entry point: HTTP through Django (beside it, under /langgraph/, a langgraph.json's
custom routes), websockets through Channels (auth + origin checked)."""

from __future__ import annotations

import os

# Django's handler, its middleware run in one thread hop a request (dashboard/web/handler.py)
from dashboard.web.handler import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs apps loaded)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from dashboard.duties import with_duties  # noqa: E402
from dashboard.lgserver.custom_routes import with_custom_routes  # noqa: E402
from dashboard.web.middleware import WebsocketGate  # noqa: E402
from dashboard.web.routing import websocket_urlpatterns  # noqa: E402

# the background duties (crons, deadlines, notices, the reaper) start with the application,
# however it is served: daphne, uvicorn or manage.py serve (dashboard/duties.py)
application = with_duties(ProtocolTypeRouter(
    {
        "http": with_custom_routes(django_asgi_app),
        # the origin must be the page's own scheme, host and port; unknown paths close 4404
        "websocket": WebsocketGate(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
))
