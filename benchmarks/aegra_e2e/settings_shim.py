"""Stands in for ``aegra_api.settings`` (the suite reads only the server's URL and the
heartbeat interval from it); installed as ``aegra_api/settings.py`` by run.sh."""

import os
from types import SimpleNamespace

settings = SimpleNamespace(
    app=SimpleNamespace(SERVER_URL=os.environ["SERVER_URL"], KEEPALIVE_INTERVAL_SECS=5.0),
    observability=SimpleNamespace(ENABLE_PROMETHEUS_METRICS=False),
)
