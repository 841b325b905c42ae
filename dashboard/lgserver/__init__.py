"""LangGraph's server API (the Agent Protocol and LangGraph's superset) under ``/langgraph/``.

The official clients (``langgraph-sdk``, Agent Chat UI, Agent Inbox) drive Planwatch's own
run service through it; nothing here runs a graph or writes a run's fields itself:

- ``auth``: the ``x-api-key`` header takes the REST API's tokens;
- ``shapes``: assistants, threads, runs and states as LangGraph's server shapes them;
- ``threads``: which run of a thread a request acts on, and how a thread's next run
  starts (a new run, a resume, a continue, a fork);
- ``stream``: a run's event log as server-sent events in LangGraph's stream modes;
- ``views`` and ``urls``: the endpoints;
- ``custom_routes``: a langgraph.json's own app (``http.app``) beside them, never in
  place of one.

A thread is a :class:`~dashboard.models.Thread`; a LangGraph run is a Planwatch run, and a
resume continues the same run (its id is the run's), so a run's trace, inbox and audit
trail span its questions and answers.
"""
