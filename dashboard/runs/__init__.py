"""The run engine: a run's path, module by module, in the order it flows.

dispatch → execute (the loop host) → claims → execution (begin → stream → outcome) →
translate → record (write behind, through the sink) → doorbells → finish, and back to
dispatch only through the ``on_stopped`` callback it gave the executor; every change of a
run's status, owner, seq and final fields comes from :mod:`~dashboard.runs.transitions`;
the engine reaches the ORM from async code through :mod:`~dashboard.runs.orm`.
``savers`` opens LangGraph's checkpointers on the Django database; ``layers`` is the
embedded default's channel layer; ``jobs`` are the procrastinate tasks of scale-out
workers. See docs/architecture.md.
"""
