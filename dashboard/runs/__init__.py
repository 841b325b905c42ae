"""The run engine: a run's path, module by module, in the order it flows.

dispatch → claims → execute (LangGraph's stream) → translate → record (write behind,
through the sink) → doorbells → finish; every change of a run's status, owner, seq and
final fields comes from :mod:`~dashboard.runs.transitions`. ``savers`` opens LangGraph's
checkpointers on the Django database; ``layers`` is the embedded default's channel layer;
``jobs`` are the procrastinate tasks of scale-out workers. See docs/architecture.md.
"""
