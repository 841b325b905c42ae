"""Reads: what pages, consumers and the API show. No writes here."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, cast
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import (
    Count,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    Max,
    Min,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Sum,
    TextField,
    Window,
)
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Cast, Coalesce, Now, TruncDate
from django.utils import timezone

from dashboard import policy
from dashboard.models import Cron, Interrupt, InterruptGroup, Run, RunEvent, RunQuerySet
from dashboard.runs import budgets, debugging, figures, states
from dashboard.runs.figures import Figures, figures_of
from dashboard.runs.modelcalls import messages_of
from dashboard.runs.outcome import Outcome, shown_as
from dashboard.runs.record import event_dict
from planner.registry import all_graphs, get_graph
from planner.spec import StateField, no_state_fields

User = AbstractBaseUser | AnonymousUser


RUN_SORTS = ("-started", "started", "-duration", "duration", "-model_calls", "model_calls",
             "-total_tokens", "total_tokens", "-cost_usd", "cost_usd")
"""The orders the runs list offers (``-``: descending); unknown tokens and cost, and the
duration of a run not started yet, go last."""

_SORT_BY: dict[str, Any] = {
    "started": F("created_at"),
    # an active run's duration runs until now, as its row shows it
    "duration": ExpressionWrapper(Coalesce(F("finished_at"), Now()) - F("started_at"),
                                  output_field=DurationField()),
    "model_calls": F("model_calls"), "total_tokens": F("total_tokens"),
    "cost_usd": F("cost_usd"),
}

RUN_SEARCH_MAX = 200
"""The longest text the runs list searches for (a goal is rarely longer)."""


def run_goal_fields(*, graph: str) -> tuple[str, ...]:
    """The input fields a run's goal is read from, in order: ``goal``, then the graph's
    text fields (only ``goal`` for a graph no longer registered)."""
    try:
        fields = get_graph(graph).input_fields
    except KeyError:
        fields = ()
    return ("goal", *(f.name for f in fields
                      if f.kind in ("text", "textarea") and f.name != "goal"))


def _run_search(text: str, *, via: str = "") -> Q:
    """Runs whose goal contains ``text`` (any case) or whose id starts with it (``via``:
    the path to the run from the model searched, such as ``"run__"``)."""
    found = Q(**{f"{via}id__istartswith": text}) | Q(**{f"{via}input__goal__icontains": text})
    for spec in all_graphs():
        for name in run_goal_fields(graph=spec.name)[1:]:
            found |= Q(**{f"{via}graph": spec.name, f"{via}input__{name}__icontains": text})
    return found


def run_dates_problem(*, since: date | None, until: date | None) -> str:
    """Why a date range cannot be listed ("" when it can): the form and the API ask it."""
    if since and until and until < since:
        return (f"the range ends ({until.isoformat()}) before it starts "
                f"({since.isoformat()}); swap the two dates")
    return ""


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def run_list(*, user: Any, graph: str = "", status: str = "", shown: str = "",
             outcome: str = "", created_by: str = "", q: str = "", since: date | None = None,
             until: date | None = None, budget: str = "",
             sort: str = "-started") -> QuerySet[Run]:
    """The runs ``user`` may read (:mod:`dashboard.policy`), newest first (or in a
    :data:`RUN_SORTS` order), filtered by graph, execution ``status``, the status the
    pages show (``shown``: a finished run's read from its outcome, so a failed plan is
    failed), ``outcome``, creator's username, text ``q`` (in the goal, or the start of the
    id), the days they were started on (``since`` and ``until`` included, in the site's
    time zone) and whether they reached a budget (``budget="reached"``); a queued run with
    its ``queue_position``."""
    if sort not in RUN_SORTS:
        raise ValueError(f"unknown sort {sort!r}; use one of: {', '.join(RUN_SORTS)}")
    by = _SORT_BY[sort.lstrip("-")]
    first = by.desc(nulls_last=True) if sort.startswith("-") else by.asc(nulls_last=True)
    runs = policy.runs_visible(user, Run.objects.select_related("created_by")
                               .with_queue_position()).order_by(first, "-created_at", "-id")
    if graph:
        runs = runs.filter(graph=graph)
    if status:
        runs = runs.filter(state__in=states.showing(status))
    if shown:
        finished = shown_as(shown)
        by_state = Q(state__in=states.showing(shown))
        # a finished run is filed by its outcome (one that has none: by its state)
        runs = runs.filter(Q(outcome__in=finished) | Q(by_state, outcome__isnull=True)
                           if finished else by_state)
    if outcome:
        if outcome not in Outcome.values:
            raise ValueError(f"unknown outcome {outcome!r}; use one of: "
                             f"{', '.join(Outcome.values)}")
        runs = runs.filter(outcome=outcome)
    if budget == "reached":
        runs = cast(RunQuerySet, runs).budget_reached()
    elif budget:
        raise ValueError(f"unknown budget filter {budget!r}; use reached")
    if created_by:
        runs = runs.filter(created_by__username=created_by)
    if q.strip():
        runs = runs.filter(_run_search(q.strip()[:RUN_SEARCH_MAX]))
    if since:
        runs = runs.filter(created_at__gte=_day_start(since))
    if until:
        runs = runs.filter(created_at__lt=_day_start(until + timedelta(days=1)))
    return runs


def run_get(*, run_id: UUID | str) -> Run:
    """One run, with its ``queue_position`` if it is queued (raises ``Run.DoesNotExist``)."""
    return Run.objects.select_related("created_by").with_queue_position().get(id=run_id)


def run_figures(*, run_id: UUID | str, now: datetime | None = None) -> Figures:
    """A run's working time, waits for people, model time and cost, from its events (the
    figures every page, the API, the export and the spans show)."""
    rows = RunEvent.objects.filter(run_id=run_id).order_by("seq").values(
        "seq", "kind", "payload", "at", "created_at")
    return figures_of(rows, now=now or timezone.now())


@dataclass(frozen=True)
class RunBudget:
    """A run's budgets and their use, and the one it is paused at (if it is)."""

    uses: list[budgets.BudgetUse]
    paused_on: dict[str, Any] | None

    @property
    def question(self) -> str:
        """What a run paused at its budget asks its operators."""
        return budgets.extend_text(self.paused_on) if self.paused_on else ""


def run_budget(*, run: Run, figures: Figures | None = None) -> RunBudget | None:
    """A run's budgets and their use now (None: it has none), for the trace header and the
    API; ``figures``: its working time, if folded already."""
    if not run.budget:
        return None
    if figures is None:
        figures = run_figures(run_id=run.id)
    warned, reached = budgets.marks_of(budgets.marks_query(run.id))
    return RunBudget(budgets.budget_use(run, working_seconds=figures.working, warned=warned,
                                        reached=reached), budgets.paused_on(run))


def budget_question(reached: Mapping[str, Any]) -> str:
    """What a run paused at the budget ``reached`` asks (``cost budget of $0.50 reached``)."""
    return budgets.extend_text(reached)


def run_paused_at_budget(*, run: Run) -> str:
    """What a run paused at one of its budgets asks (``model calls budget of 2 reached (2
    used)``); "" when it is not paused, or paused at a breakpoint."""
    if run.status != Run.Status.PAUSED:
        return ""
    reached = budgets.paused_on(run)
    return budgets.extend_text(reached) if reached else ""


def runs_at_budget(*, user: Any, limit: int = 50) -> list[tuple[Run, str, dict[str, Any]]]:
    """Runs ``user`` may read that wait at one of their budgets (paused there), oldest
    first: each with its question (``budget of $0.50 reached``) and the budget."""
    runs = policy.runs_visible(user, Run.objects.filter(state=Run.State.PAUSED)
                               .budget_reached()).order_by("created_at")[:limit]
    found = []
    for run in runs:
        reached = budgets.paused_on(run)
        if reached is not None:
            found.append((run, budgets.extend_text(reached), reached))
    return found


WAIT_KINDS = (figures.ASKED, figures.ANSWERED, figures.PAUSED, *figures.GOES_ON, *figures.ENDS)
"""The kinds of event a run's working time and its waits for people are folded from."""


def runs_waits(*, run_ids: Iterable[UUID | str], now: datetime | None = None
               ) -> dict[str, Figures]:
    """Working time and waits for people of many runs (the runs list), in one query: each
    run's first event and the events that begin or end a wait or the run, folded as
    :func:`run_figures` folds the whole log (its model time and cost are left out)."""
    ids = [str(i) for i in run_ids]
    if not ids:
        return {}
    rows = (RunEvent.objects.filter(run_id__in=ids)
            .filter(Q(seq=1) | Q(kind__in=WAIT_KINDS))
            .order_by("run_id", "seq").values("run_id", "seq", "kind", "payload", "at",
                                              "created_at"))
    folds: dict[str, figures.FiguresFold] = {}
    for row in rows:
        folds.setdefault(str(row["run_id"]), figures.FiguresFold()).add(row)
    moment = now or timezone.now()
    return {run_id: fold.at(moment) for run_id, fold in folds.items()}


def run_cursor(*, run_id: UUID | str) -> tuple[int, str] | None:
    """A run's last seq and status (one indexed row), or None if it was deleted."""
    return Run.objects.filter(id=run_id).values_list("last_seq", "status").first()


def run_can_view(*, user: User, run: Run) -> bool:
    """Whether ``user`` may view ``run``: its owner, or the team (:mod:`dashboard.policy`)."""
    return policy.may_read_run(user, run)


def run_events(*, run_id: UUID | str, after: int = 0, limit: int | None = None
               ) -> QuerySet[RunEvent]:
    """A run's events after ``seq`` ``after``, in seq order."""
    events = RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")
    return events[:limit] if limit else events


def interrupts_pending(*, user: Any, run_id: UUID | str | None = None, graph: str = ""
                       ) -> QuerySet[Interrupt]:
    """Pending interrupts across the runs ``user`` may read (or of one run), oldest first."""
    qs = policy.interrupts_visible(user, Interrupt.objects.filter(
        status=Interrupt.Status.PENDING).select_related("run"))
    if run_id:
        qs = qs.filter(run_id=run_id)
    if graph:
        qs = qs.filter(run__graph=graph)
    return qs.order_by("created_at", "id")


QUESTION_KEY = Coalesce(KT("payload__label"), KT("payload__prompt"), KT("payload__question"),
                        Cast("payload", TextField()), output_field=TextField())
"""What makes two runs' questions "the same question": the words the graph asks with (its
``label``, else its ``prompt`` or ``question``; a plain-text question is its own text)."""

INBOX_SORTS = ("oldest", "newest")
"""The inbox's orders: the longest-waiting question first (default), or the newest."""

INBOX_AGES = {"1m": timedelta(minutes=1), "10m": timedelta(minutes=10),
              "1h": timedelta(hours=1), "1d": timedelta(days=1)}
"""The inbox's age filter: questions waiting at least this long."""


INBOX_FOR = ("me", "groups", "free")
"""Whose questions the inbox lists besides everyone's: taken by or given to me, for my
groups, or taken by nobody yet."""


def interrupts_inbox(*, q: str = "", graph: str = "", question: str = "",
                     older_than: str = "", sort: str = "oldest", assigned: str = "",
                     user: User | None = None) -> QuerySet[Interrupt]:
    """Pending interrupts for the inbox, grouped by question across runs (by graph, then
    the words asked: :data:`QUESTION_KEY`), the groups and the questions inside each in
    ``sort`` order; ``q`` finds the run's goal, the question's words or the run id's start."""
    if sort not in INBOX_SORTS:
        raise ValueError(f"unknown sort {sort!r}; use one of: {', '.join(INBOX_SORTS)}")
    if assigned and assigned not in INBOX_FOR:
        raise ValueError(f"unknown assigned {assigned!r}; use one of: {', '.join(INBOX_FOR)}")
    if older_than and older_than not in INBOX_AGES:
        raise ValueError(f"unknown age {older_than!r}; use one of: {', '.join(INBOX_AGES)}")
    group: list[Any] = [F("run__graph"), QUESTION_KEY]
    qs = (policy.interrupts_visible(user, Interrupt.objects.filter(
              status=Interrupt.Status.PENDING))
          .select_related("run", "run__created_by", "assigned_to")
          .prefetch_related("answer_groups").annotate(question_key=QUESTION_KEY))
    if graph:
        qs = qs.filter(run__graph=graph)
    if question:
        qs = qs.filter(question_key=question)
    if assigned == "me":
        qs = qs.filter(assigned_to_id=getattr(user, "pk", None))
    elif assigned == "groups":
        mine = (user.groups.values("name") if user is not None and user.is_authenticated
                and hasattr(user, "groups") else [])
        qs = qs.filter(Exists(InterruptGroup.objects.filter(interrupt=OuterRef("pk"),
                                                            name__in=mine)))
    elif assigned == "free":
        qs = qs.filter(assigned_to__isnull=True)
    if older_than:
        qs = qs.filter(created_at__lte=timezone.now() - INBOX_AGES[older_than])
    text = q.strip()[:RUN_SEARCH_MAX]
    if text:
        qs = qs.filter(_run_search(text, via="run__") | Q(question_key__icontains=text))
    qs = qs.annotate(group_size=Window(Count("id"), partition_by=group))
    if sort == "oldest":
        qs = qs.annotate(group_at=Window(Min("created_at"), partition_by=group))
        return qs.order_by("group_at", "run__graph", "question_key", "created_at", "id")
    qs = qs.annotate(group_at=Window(Max("created_at"), partition_by=group))
    return qs.order_by("-group_at", "run__graph", "question_key", "-created_at", "-id")


def interrupts_questions(*, user: Any, graph: str = "") -> list[tuple[str, str, int]]:
    """The questions waiting across the runs ``user`` may read: ``(graph, words, how
    many)``, by graph and words (the inbox's question filter offers them)."""
    qs = policy.interrupts_visible(user, Interrupt.objects.filter(
        status=Interrupt.Status.PENDING))
    if graph:
        qs = qs.filter(run__graph=graph)
    rows = (qs.annotate(key=QUESTION_KEY).values("run__graph", "key")
            .annotate(n=Count("id")).order_by("run__graph", "key"))
    return [(r["run__graph"], r["key"], r["n"]) for r in rows]


def interrupts_asked_since(*, user: Any, after: int, limit: int = 5) -> list[Interrupt]:
    """Questions asked after the one numbered ``after`` (pending still) that ``user`` may
    answer: of runs they may read, for their groups or for anyone; the oldest first."""
    if user is None or not user.has_perm("dashboard.answer_interrupt"):
        return []
    qs = policy.interrupts_visible(user, Interrupt.objects.filter(
        status=Interrupt.Status.PENDING, pk__gt=after))
    if not user.is_superuser:
        groups = InterruptGroup.objects.filter(interrupt=OuterRef("pk"))
        qs = qs.filter(~Exists(groups)
                       | Exists(groups.filter(name__in=user.groups.values("name"))))
    return list(qs.select_related("run").order_by("pk")[:limit])


def interrupts_newest_pk() -> int:
    """The number of the newest question asked (0: none yet)."""
    return Interrupt.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def interrupt_answerer_users(*, interrupt: Interrupt, groups: list[str] | None = None,
                             limit: int = 200) -> list[Any]:
    """Who may answer ``interrupt``: active users with the answer permission who may read
    its run, members of ``groups`` (by default its own; none: anyone), superusers too."""
    users = get_user_model().objects.with_perm(  # type: ignore[attr-defined]
        "dashboard.answer_interrupt",
        backend="django.contrib.auth.backends.ModelBackend").filter(is_active=True)
    names = interrupt.group_names if groups is None else groups
    if names:
        users = users.filter(Q(groups__name__in=names) | Q(is_superuser=True))
    owner = policy.run_owner_id(interrupt.run)
    return [u for u in users.distinct().order_by("pk")[:limit] if policy.may_read(u, owner)]


def interrupt_answerers(*, interrupt: Interrupt, limit: int = 200) -> list[str]:
    """The usernames a lead may give ``interrupt`` to (:func:`interrupt_answerer_users`)."""
    return sorted({u.get_username()
                   for u in interrupt_answerer_users(interrupt=interrupt, limit=limit)})


HISTORY_OUTCOMES = {"answered": Interrupt.Status.ANSWERED, "expired": Interrupt.Status.EXPIRED,
                    "withdrawn": Interrupt.Status.CANCELLED}
"""What became of a question that no longer waits: answered (by someone, or by its
deadline's default), expired (its deadline passed and its run was cancelled for it), or
withdrawn (its run was cancelled, declined from a LangGraph client, or moved on)."""


def interrupts_history(*, user: Any, q: str = "", graph: str = "", question: str = "",
                       outcome: str = "", via: str = "", by: str = "",
                       since: date | None = None, until: date | None = None
                       ) -> QuerySet[Interrupt]:
    """Questions that no longer wait, newest asked first, with ``question_key`` and
    ``waited`` (answer time minus ask time; None unless answered): filtered by the words
    or run (``q``), graph, question, outcome (:data:`HISTORY_OUTCOMES`), channel
    (``Interrupt.Channel``), who answered, and the days asked on (site time zone); of
    the runs ``user`` may read."""
    if outcome and outcome not in HISTORY_OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; use one of: "
                         f"{', '.join(HISTORY_OUTCOMES)}")
    qs = (policy.interrupts_visible(user, Interrupt.objects.exclude(
              status=Interrupt.Status.PENDING))
          .select_related("run", "answered_by")
          .annotate(question_key=QUESTION_KEY, waited=ExpressionWrapper(
              F("answered_at") - F("created_at"), output_field=DurationField())))
    if outcome:
        qs = qs.filter(status=HISTORY_OUTCOMES[outcome])
    if graph:
        qs = qs.filter(run__graph=graph)
    if question:
        qs = qs.filter(question_key=question)
    if via:
        qs = qs.filter(answered_via=via)
    if by:
        qs = qs.filter(Q(answered_by__username=by) | Q(answered_by_name=by))
    if since:
        qs = qs.filter(created_at__gte=_day_start(since))
    if until:
        qs = qs.filter(created_at__lt=_day_start(until + timedelta(days=1)))
    text = q.strip()[:RUN_SEARCH_MAX]
    if text:
        qs = qs.filter(_run_search(text, via="run__") | Q(question_key__icontains=text))
    return qs.order_by("-created_at", "-id")


@dataclass(frozen=True)
class AnswerTimes:
    """How long one question of a graph waited for its answers."""

    graph: str
    question: str
    answered: int
    median_seconds: float
    p90_seconds: float


def _rank(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value with ``share`` of them at or below."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def interrupts_answer_times(history: QuerySet[Interrupt]) -> list[AnswerTimes]:
    """Per graph and question of ``history`` (its answered ones): the median and the 90th
    percentile (nearest rank) of the time from asked to answered, slowest median first."""
    waits: dict[tuple[str, str], list[float]] = {}
    rows = (history.filter(status=Interrupt.Status.ANSWERED, answered_at__isnull=False)  # type: ignore[misc]  # annotated by interrupts_history
            .order_by().values_list("run__graph", "question_key", "created_at", "answered_at"))
    for graph, key, asked, answered in rows.iterator():
        waits.setdefault((graph, key), []).append(max(0.0, (answered - asked).total_seconds()))
    found = []
    for (graph, key), seconds in waits.items():
        seconds.sort()
        found.append(AnswerTimes(graph, key, len(seconds), statistics.median(seconds),
                                 _rank(seconds, 0.9)))
    return sorted(found, key=lambda t: (-t.median_seconds, t.graph, t.question))


def interrupts_of_run(*, run_id: UUID | str) -> QuerySet[Interrupt]:
    """Every interrupt of one run (pending, answered, withdrawn), oldest first."""
    return (Interrupt.objects.filter(run_id=run_id)
            .select_related("run", "answered_by", "assigned_to")
            .prefetch_related("answer_groups").order_by("created_at", "id"))


def interrupts_pending_count(*, user: Any) -> int:
    """How many interrupts of runs ``user`` may read wait for an answer (the navigation
    badge)."""
    return policy.interrupts_visible(user, Interrupt.objects.filter(
        status=Interrupt.Status.PENDING)).count()


@dataclass(frozen=True)
class DebugSchema:
    """What debugging a graph's runs offers: its nodes and its typed state channels."""

    nodes: list[str]
    channels: dict[str, Any]
    internal: tuple[str, ...] = ()
    """The channels the graph declares as its bookkeeping (``GraphSpec.internal_channels``)."""
    fields: Callable[[Mapping[str, Any]], Mapping[str, tuple[StateField, ...]]] = (
        no_state_fields)
    """The channels edited field by field, given the state (``GraphSpec.state_fields``)."""


@functools.cache
def graph_debug_schema(*, graph: str) -> DebugSchema:
    """The nodes breakpoints can name and the channels a fork can edit (raises KeyError)."""
    spec = get_graph(graph)
    builder = spec.inspection_builder
    return DebugSchema(nodes=sorted(builder.nodes), channels=debugging.state_channels(builder),
                       internal=spec.internal_channels, fields=spec.state_fields)


@dataclass(frozen=True)
class Lineage:
    """A run's branches: where it came from, its siblings and its own forks."""

    parent: Run | None
    siblings: list[Run]
    children: list[Run]


def run_lineage(*, run: Run) -> Lineage:
    """The runs forked from the same parent as ``run``, and those forked from ``run``."""
    parent = (Run.objects.select_related("created_by").filter(id=run.parent_id).first()
              if run.parent_id else None)
    siblings = list(Run.objects.filter(parent_id=run.parent_id).exclude(id=run.id)
                    .order_by("created_at")) if parent else []
    children = list(run.forks.select_related("created_by").order_by("created_at"))
    return Lineage(parent=parent, siblings=siblings, children=children)


def crons_listed(*, user: Any, limit: int = 200) -> QuerySet[Cron]:
    """The scheduled runs ``user`` may read, for the crons page: enabled first, soonest
    next run first."""
    return (policy.crons_visible(user).select_related("last_run", "thread")
            .order_by("-enabled", F("next_run_date").asc(nulls_last=True))[:limit])


# -- model calls, tokens and cost ------------------------------------------------------

MODEL_EVENTS = (RunEvent.Kind.MODEL_STARTED, RunEvent.Kind.MODEL_FINISHED)


def model_calls_of(*, run_id: UUID | str) -> list[dict[str, Any]]:
    """A run's model calls, in the order they started (see ``modelcalls.messages_of``)."""
    events = RunEvent.objects.filter(run_id=run_id, kind__in=MODEL_EVENTS).order_by("seq")
    return messages_of([event_dict(e) for e in events])


def model_usage_by_node(*, run_id: UUID | str) -> list[dict[str, Any]]:
    """Calls, tokens (None: not reported), cost (None: unknown) and model time per node."""
    nodes: dict[tuple[str, str], dict[str, Any]] = {}
    for call in model_calls_of(run_id=run_id):
        row = nodes.setdefault((call["namespace"], call["node"]), {
            "node": call["node"], "namespace": call["namespace"], "model_calls": 0,
            "input_tokens": None, "output_tokens": None, "total_tokens": None,
            "cost_usd": None, "latency_ms": 0.0})
        row["model_calls"] += 1
        row["latency_ms"] += call.get("latency_ms") or 0.0
        usage, cost = call.get("usage") or {}, call.get("cost")
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            if usage.get(name) is not None:
                row[name] = (row[name] or 0) + usage[name]
        if cost:
            row["cost_usd"] = (row["cost_usd"] or 0.0) + cost["total"]
    return list(nodes.values())


def _usage(runs: QuerySet[Any, Any]) -> QuerySet[Any, dict[str, Any]]:
    return runs.annotate(runs=Count("id"), calls=Sum("model_calls"),
                         input=Sum("input_tokens"), output=Sum("output_tokens"),
                         total=Sum("total_tokens"), cost=Sum("cost_usd"))


def model_usage_by_graph() -> list[dict[str, Any]]:
    """Runs, model calls, tokens and cost of each graph (sums; None where none reported)."""
    rows = _usage(Run.objects.order_by().values("graph")).order_by("graph")
    return [{"graph": r["graph"], "runs": r["runs"], "model_calls": r["calls"] or 0,
             "input_tokens": r["input"], "output_tokens": r["output"],
             "total_tokens": r["total"], "cost_usd": r["cost"]} for r in rows]


def model_usage_by_day(*, graph: str = "") -> list[dict[str, Any]]:
    """The same sums per day the runs were created (UTC), newest first."""
    runs = Run.objects.order_by()
    if graph:
        runs = runs.filter(graph=graph)
    rows = _usage(runs.annotate(day=TruncDate("created_at")).values("day")).order_by("-day")
    return [{"day": r["day"], "runs": r["runs"], "model_calls": r["calls"] or 0,
             "input_tokens": r["input"], "output_tokens": r["output"],
             "total_tokens": r["total"], "cost_usd": r["cost"]} for r in rows]


def metadata_match[M: Model](rows: QuerySet[M], metadata: Mapping[str, Any] | None
                             ) -> QuerySet[M]:
    """``rows`` whose ``metadata`` holds each key with exactly that JSON value: a key is a
    key, never an ORM lookup (``x__in`` is the key "x__in", ``x__regex`` no regex)."""
    for i, (key, value) in enumerate((metadata or {}).items()):
        name = f"_meta_{i}"
        rows = rows.annotate(**{name: KeyTransform(str(key), "metadata")}).filter(
            **{name: value})
    return rows
