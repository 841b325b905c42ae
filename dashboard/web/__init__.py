"""The web layer: everything that turns a request or a socket into a call and the answer
back into a page, a fragment or JSON.

It owns the pages (``views/``, ``forms/``, ``urls.py``), the websockets (``consumers.py``,
``routing.py``), the middleware (``middleware.py``: crafted input, dropped connections,
websocket gatekeeping), the access log of ``manage.py serve`` (``accesslog.py``), htmx
typing, the template context and tags, and ``presentation/``: what a page or the API shows
of a run (trace, timeline, waterfall, header, inbox, results, exports).

Import rule: web may import services, selectors, models and the engine's read APIs
(``dashboard.runs``); nothing below it (services, selectors, models, checkpoints, the
engine) imports web. The other entry points (``dashboard/api/``, ``dashboard/lgserver/``,
``dashboard/admin/``, management commands) may import it; ``tests/test_import_cycles.py``
checks the rule.
"""
