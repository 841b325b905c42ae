"""Who may read, act on, change and delete what: the one ownership rule.

Every resource has an owner: the user who created it.

- a thread: ``Thread.created_by``;
- a run, and everything of it (its events, interrupts, checkpoints, state, export): the
  owner of its thread (a run with no thread: the user who started it), so a run started
  by a team member on A's thread stays A's and ``/api/``, ``/langgraph/`` and the pages
  agree about it;
- an assistant: ``Assistant.created_by`` (a graph's own assistant belongs to everyone:
  all read it, nobody changes it);
- a cron: ``Cron.user``, and its runs start as that user (checked at each fire);
- a store item: the user who wrote it through ``/langgraph/store`` (:class:`StoreOwner`);
  an item a graph wrote inside a run has no owner: it is the graph's shared memory,
  read and changed by every signed-in user with the action's permission (any run of the
  graph reads and changes it too).

The rule, the same on the pages, ``/api/`` and ``/langgraph/``:

1. **Owners** read their own resources and act on them (answer, cancel, continue, fork),
   change and delete them, each action with its permission (``start_run``,
   ``cancel_run``, ``answer_interrupt``, ``debug_run``, ``fork_run``, ``delete_run``).
2. **The team** (superusers and holders of ``dashboard.view_all_threads``) reads every
   resource and acts on any, still each action with its permission: the operators who
   watch and answer everyone's runs, as on the pages before this rule.
3. A resource with no owner (started from the command line, or whose user was deleted)
   is the team's.
4. Everyone else gets the 404 of an unknown id: a resource one may not read does not
   exist for them (as LangGraph's server answers for another user's thread). A resource
   one may read but lacks the permission to act on answers 403, naming the permission.

A langgraph.json's custom routes (``http.app``) are the app's, not Planwatch's resources:
they never shadow a Planwatch route, and with ``enable_custom_route_auth`` a caller needs
a token (:func:`may_call_custom_routes`); the app decides the rest.

Policies are tiny, as DRF's permission classes: :func:`is_team`, the querysets of what
a user may reach (``*_visible``) and :func:`may_act`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from dashboard.models import Assistant, Cron, Interrupt, Run, Thread

TEAM_PERMISSION = "dashboard.view_all_threads"
"""The permission that makes a user one of the team who reads and acts on every resource."""


def is_team(user: Any) -> bool:
    """Whether ``user`` reads and acts on every user's resources (superusers too)."""
    return bool(user is not None and user.is_authenticated and user.has_perm(TEAM_PERMISSION))


def owns(user: Any, owner_id: int | None) -> bool:
    """Whether ``user`` owns a resource whose owner is ``owner_id`` (None: nobody)."""
    return bool(user is not None and user.is_authenticated and user.is_active
                and owner_id is not None and owner_id == user.pk)


def may_read(user: Any, owner_id: int | None) -> bool:
    """Whether ``user`` may read a resource owned by ``owner_id``: its owner or the team."""
    return owns(user, owner_id) or is_team(user)


def may_act(user: Any, owner_id: int | None, perm: str) -> bool:
    """Whether ``user`` may do what ``perm`` (``"cancel_run"``, …) allows on a resource
    owned by ``owner_id``: they may read it and hold the permission."""
    return may_read(user, owner_id) and bool(user.has_perm(f"dashboard.{perm}"))


def may_call_custom_routes(user: Any) -> bool:
    """Whether ``user`` may call a langgraph.json's custom routes (``http.app``) that ask for
    sign-in (``enable_custom_route_auth``): any active user with a token. What the app
    serves is the app's own, so which of it they may read or change is the app's rule; it
    finds them in ``request.user``."""
    return bool(user is not None and user.is_authenticated and user.is_active)


def _owned(user: Any, *fields: str) -> Q:
    """Rows whose owner (the first of ``fields`` that is set) is ``user``; all for the team."""
    if is_team(user):
        return Q()
    if user is None or not user.is_authenticated or not user.is_active:
        return Q(pk__in=[])
    first, *rest = fields
    mine = Q(**{first: user.pk})
    for field in rest:  # a fallback owner, asked only where the first is unset
        mine |= Q(**{f"{first}__isnull": True, field: user.pk})
    return mine


def threads_visible(user: Any) -> QuerySet[Thread]:
    """The threads ``user`` may read and act on."""
    return Thread.objects.filter(_owned(user, "created_by"))


def run_owner_id(run: Run) -> int | None:
    """Who owns a run: its thread's owner, or for a run with no thread its starter."""
    if run.conversation_id is not None:
        thread = Thread.objects.filter(id=run.conversation_id).values_list(
            "created_by_id", flat=True).first()
        return thread
    return run.created_by_id


def runs_visible(user: Any, runs: QuerySet[Run] | None = None) -> QuerySet[Run]:
    """The runs (of ``runs``, default all) ``user`` may read and act on."""
    runs = Run.objects.all() if runs is None else runs
    if is_team(user):
        return runs
    if user is None or not user.is_authenticated or not user.is_active:
        return runs.none()
    return runs.filter(Q(conversation__created_by=user.pk)
                       | Q(conversation__isnull=True, created_by=user.pk))


def interrupts_visible(user: Any, interrupts: QuerySet[Interrupt] | None = None
                       ) -> QuerySet[Interrupt]:
    """The interrupts (of ``interrupts``) of runs ``user`` may read."""
    interrupts = Interrupt.objects.all() if interrupts is None else interrupts
    if is_team(user):
        return interrupts
    return interrupts.filter(run__in=runs_visible(user).values("pk"))


def may_read_run(user: Any, run: Run) -> bool:
    """Whether ``user`` may read ``run`` (its trace, events, checkpoints, export)."""
    return is_team(user) or owns(user, run_owner_id(run))


def may_act_on_run(user: Any, run: Run, perm: str) -> bool:
    """Whether ``user`` may do what ``perm`` allows on ``run``."""
    return may_read_run(user, run) and bool(user.has_perm(f"dashboard.{perm}"))


def assistants_visible(user: Any) -> QuerySet[Assistant]:
    """The created assistants ``user`` may read, run, change and delete."""
    return Assistant.objects.filter(_owned(user, "created_by"))


def crons_visible(user: Any) -> QuerySet[Cron]:
    """The crons ``user`` may read, change and delete."""
    return Cron.objects.filter(_owned(user, "user"))


def cron_may_fire(cron: Cron) -> str:
    """Why ``cron`` may not start a run now ("" if it may): it runs as its user, who must
    exist, be active and hold ``start_run`` at each fire."""
    user = cron.user
    if user is None:
        return "its user was deleted; a cron runs as its user"
    if not user.is_active:
        return f"its user {user.get_username()!r} is inactive; a cron runs as its user"
    if not user.has_perm("dashboard.start_run"):
        return (f"its user {user.get_username()!r} lost the 'dashboard.start_run' "
                "permission; a cron runs as its user")
    return ""


def may_read_item(user: Any, owner_id: int | None) -> bool:
    """Whether ``user`` may read a store item written by ``owner_id`` through the API
    (None: a graph wrote it inside a run, and every signed-in user reads it, as every run
    of the graph could)."""
    if owner_id is None:
        return bool(user is not None and user.is_authenticated and user.is_active)
    return may_read(user, owner_id)


def may_change_item(user: Any, owner_id: int | None) -> bool:
    """Whether ``user`` may overwrite or delete an existing store item: its writer, or the
    team; a graph's item is shared, as the graph's memory (whoever may run the graph
    changes it through its runs anyway), so every signed-in user may (the view checks
    ``start_run`` or ``delete_run``)."""
    return may_read_item(user, owner_id)
