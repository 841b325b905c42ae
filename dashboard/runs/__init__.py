"""The run engine: a run's path, module by module, in the order it flows.

dispatch → execute (the loop host) → store (the claim) → execution (begin → stream →
outcome, with the run's event writer) → translate → record (the write-behind) → store →
doorbells, and back to dispatch only through the ``on_stopped`` callback it gave the
executor. Every change of a run's status, owner, seq and final fields is decided and
written by :mod:`~dashboard.runs.store`, the only code that writes a run or its events;
the engine reaches the ORM from async code through :mod:`~dashboard.runs.orm`.
``savers`` opens LangGraph's checkpointers on the Django database; ``layers`` is the
embedded default's channel layer; ``jobs`` are the procrastinate tasks of scale-out
workers. See docs/architecture.md.
"""
