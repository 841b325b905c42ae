"""Runs, their gapless event log, and the interrupts they raise."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from dashboard.compiled import compiled_once
from dashboard.runs import states
from dashboard.runs.outcome import MEANINGS as OUTCOME_MEANINGS
from dashboard.runs.outcome import Outcome, Told, told
from dashboard.runs.states import State, Status, ThreadStatus
from planner.registry import GraphSpec, get_graph


class Thread(models.Model):
    """A conversation as LangGraph's server API sees it: the runs that continue one state.

    Every run belongs to one (a run started from the pages gets a thread of its own, with
    the run's id). A thread is ONE LangGraph checkpoint thread, its id the thread's (as on
    LangGraph's server): its runs write their checkpoints there, each checkpoint's
    metadata naming the run (``run_id``); a run from a past checkpoint is a branch of that
    thread (its first checkpoint's parent is the one it went on from). The thread's state
    is its newest checkpoint.
    """

    Status = ThreadStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    metadata = models.JSONField(default=dict, blank=True)
    # LangGraph's thread status, written with every change of its runs' statuses (by
    # dashboard.runs.store's rule), so a search filters on a column
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE)
    graph = models.CharField(max_length=100, blank=True,
                             help_text="The graph of its runs (empty until the first run).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="threads",
    )
    created_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["-updated_at"], name="thread_updated"),
                   models.Index(fields=["created_by", "-created_at"],
                                name="thread_owner_created"),
                   models.Index(fields=["status", "-created_at"], name="thread_status_created")]
        # the team: reads and acts on every user's resources (dashboard.policy)
        permissions = [("view_all_threads",
                        "Can see and act on every user's threads, runs, assistants, crons "
                        "and store items (the team)")]

    def __str__(self) -> str:
        return f"thread {str(self.id)[:8]}"

    def latest_run(self) -> Run | None:
        """The newest run not waiting its turn (its state is the thread's): the first of
        :meth:`RunQuerySet.latest_first`, whose SQL is compiled once (compiling it was a
        fifth of a run request's decision, asked on every one)."""
        return next(iter(Run.objects.raw(*_latest_run_sql(self.pk))), None)

    def has_queue(self) -> bool:
        """Whether runs are enqueued on the thread, waiting for their turn."""
        return self.runs.waiting_turn().exists()


@compiled_once
def _latest_run_sql(thread_id: uuid.UUID) -> QuerySet[Run]:
    """:meth:`Thread.latest_run`'s query, as :meth:`RunQuerySet.latest_first` asks it."""
    return Run.objects.filter(conversation_id=thread_id).latest_first()[:1]


class RunQuerySet(models.QuerySet["Run"]):
    """The questions about a run's state, asked in SQL (one place for each rule)."""

    def running(self) -> RunQuerySet:
        """Runs an executor holds now (at most one per thread: a database constraint)."""
        return self.filter(state=State.RUNNING)

    def budget_reached(self) -> RunQuerySet:
        """Runs that reached one of their budgets (paused or stopped there), at any time."""
        return self.filter(Exists(RunEvent.objects.filter(
            run=OuterRef("pk"), kind=RunEvent.Kind.BUDGET_REACHED)))

    def busy(self) -> RunQuerySet:
        """Runs that execute, wait to, or are about to resume (an answer or a continue
        recorded and not yet taken up); :meth:`Run.is_busy` asks it of one run."""
        return self.filter(state__in=states.BUSY)

    def waiting_turn(self) -> RunQuerySet:
        """Runs enqueued behind another run of their thread, not started yet."""
        return self.filter(state=State.QUEUED, waits_for__isnull=False)

    def latest_first(self) -> RunQuerySet:
        """Newest first, without the runs enqueued behind another that have not started
        (waiting their turn, or cancelled before it came: a thread's state is its latest
        run's that is not)."""
        return self.exclude(waits_for__isnull=False, started_at__isnull=True).order_by(
            "-created_at")

    def with_queue_position(self) -> RunQuerySet:
        """With ``queue_position``: for a run queued for a slot, 1 + the runs queued for
        one before it (they take a free slot first: executors and procrastinate's queue go
        by age); None for any other run, and for one enqueued behind a run of its thread
        (it waits for that run, not for a slot). One correlated count on the state index."""
        ahead = Run.objects.filter(
            Q(created_at__lt=OuterRef("created_at"))
            | Q(created_at=OuterRef("created_at"), id__lt=OuterRef("id")),
            state=State.QUEUED, waits_for__isnull=True,
        ).order_by().values("state").annotate(n=Count("id")).values("n")
        return self.annotate(queue_position=Case(
            When(state=State.QUEUED, waits_for__isnull=True,
                 then=Coalesce(Subquery(ahead, output_field=IntegerField()), 0) + 1),
            default=None, output_field=IntegerField()))


class Run(models.Model):
    """One run of a registered planner graph on its thread's checkpoint thread: from its
    start (or the checkpoint it went on from) to its end, across its questions' answers and
    continues (the operator's unit: one trace, one row of the runs list)."""

    State = State
    Status = Status
    Outcome = Outcome

    # statuses as people and the APIs see them
    FINISHED = tuple(dict.fromkeys(states.MEANINGS[s].status for s in states.FINISHED))
    ACTIVE = tuple(dict.fromkeys(states.MEANINGS[s].status for s in states.ACTIVE))

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    graph = models.CharField(max_length=100, db_index=True)
    graph_version = models.PositiveIntegerField(default=1)
    # the LangGraph checkpoint thread it writes to: its thread's id (``conversation``); its
    # own checkpoints are those whose metadata names it (``run_id``)
    thread_id = models.CharField(max_length=200, db_index=True)
    # the one field a transition writes (dashboard.runs.states); the status people and the
    # APIs see is the database's to derive from it
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    status = models.GeneratedField(
        expression=Case(*[When(state=s, then=Value(m.status))
                          for s, m in states.MEANINGS.items() if m.status != s],
                        default=F("state")),
        output_field=models.CharField(max_length=16), db_persist=True, choices=Status.choices)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    error_traceback = models.TextField(blank=True)
    # how it ended, decided once when it stops (dashboard.runs.outcome); null while it has
    # not ended (a fact, not a marker string: the store's STOP keeps a null it is not given)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, null=True,  # noqa: DJ001
                               blank=True, default=None)
    outcome_reason = models.TextField(blank=True, default="",
                                      help_text="Why it ended so (\"\" for a goal met).")
    current_node = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="runs",
    )
    # the audit trail outlives the account: who started it, as a name kept beside the link
    created_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Executor bookkeeping: who holds the run, proof it is alive, the last seq written.
    owner = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    last_seq = models.PositiveIntegerField(default=0)
    epoch = models.PositiveIntegerField(
        default=0, help_text="The fencing token of the run's claim: moved on by every claim, "
        "so a write of an executor that lost the run (its epoch behind) is refused.")
    attempts = models.PositiveIntegerField(
        default=0, help_text="Claims of the run since it last stopped or wrote a checkpoint "
        "(a start or resume is 1, each recovery one more); past PLANWATCH_RUN_MAX_ATTEMPTS "
        "the run is failed instead of recovered again.")
    attempt_error = models.TextField(
        blank=True, default="", help_text="The error its last execution stopped on "
        "without ending the run (a database fault), named when the run is failed for it.")
    cancel_requested = models.BooleanField(default=False)
    cancel_requested_by = models.CharField(max_length=150, blank=True)
    # Debugging: nodes to pause before or after (LangGraph's interrupt_before/after; "*" is
    # every node), one super-step then pause again, and where a fork came from.
    interrupt_before = models.JSONField(default=list, blank=True)
    interrupt_after = models.JSONField(default=list, blank=True)
    step_once = models.BooleanField(
        default=False, help_text="Pause again after the next super-step.")
    breakpoints_changed = models.BooleanField(
        default=False, help_text="The executor that holds the run applies new breakpoints.")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks",
        help_text="The run this one was forked from.")
    forked_from_checkpoint = models.CharField(
        max_length=100, blank=True, help_text="The parent's checkpoint this run started from.")
    fork_edit = models.JSONField(
        null=True, blank=True,
        help_text="State edited before the fork ran: {'values': …, 'as_node': …}, or the "
                  "new input it continues its thread with: {'input': …}.")
    # the LangGraph thread it belongs to (``thread_id`` above is the same thread's id, as
    # LangGraph's checkpointer knows it)
    conversation = models.ForeignKey(Thread, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="runs")
    metadata = models.JSONField(default=dict, blank=True,
                                help_text="A LangGraph client's run metadata.")
    multitask_strategy = models.CharField(max_length=16, blank=True)
    waits_for = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="queued_after",
        help_text="Enqueued behind this run of its thread: it starts once that one stops.")
    configurable = models.JSONField(
        default=dict, blank=True,
        help_text="A LangGraph client's config['configurable'] for the graph (thread_id is "
                  "Planwatch's own).")
    context = models.JSONField(null=True, blank=True,
                               help_text="A LangGraph client's runtime context for the graph.")
    assistant = models.ForeignKey(
        "dashboard.Assistant", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="runs", help_text="The assistant that started it (none: its graph's own).")
    assistant_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The assistant's version that started it.")
    # Model calls, rolled up as they finish (dashboard/runs/modelcalls.py): tokens and cost
    # stay null until a call reports them ("not reported", never 0).
    model_calls = models.PositiveIntegerField(default=0, help_text="Model calls finished.")
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(
        null=True, blank=True,
        help_text="USD, from PLANWATCH_MODEL_PRICES; null when no call's model is priced.")
    model_settings = models.JSONField(
        default=dict, blank=True,
        help_text="The model, its parameters and the prompts this run uses instead of its "
                  "graph's (a fork's choice): {'model': 'openai:gpt-4o-mini', 'temperature': "
                  "0.2, 'max_tokens': 512, 'prompts': {'plan': '…'}}; {}: its graph's own.")
    recursion_limit = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="The super-steps its graph may take, as the client asked (none: "
                  "PLANWATCH_MAX_RECURSION_LIMIT); every execution of the run uses it.")
    stream_tokens = models.BooleanField(
        default=False,
        help_text="Its model calls stream their tokens to its watchers as they come: the "
                  "LangGraph run request that started or went on with it asked for the "
                  "messages or messages-tuple stream mode (LangGraph's server streams a "
                  "run's chat models only then).")
    budget = models.JSONField(
        null=True, blank=True,
        help_text="Its budgets (dashboard/runs/budgets.py), resolved from the server's "
                  "default, its graph, its assistant and its request; raised by an "
                  "operator's extension.")

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["state", "-created_at"], name="run_state_created"),
            models.Index(fields=["graph", "-created_at"], name="run_graph_created"),
            models.Index(fields=["-created_at"], name="run_created"),
            models.Index(fields=["conversation", "-created_at"], name="run_thread_created"),
        ]
        constraints = [
            # one executing run per thread, whatever the race (multitask strategies included)
            models.UniqueConstraint(fields=["conversation"], condition=Q(state="running"),
                                    name="run_one_running_per_thread"),
            models.CheckConstraint(condition=Q(state__in=State.values), name="run_state_valid"),
            # an outcome is a finished run's, one its final state can have
            models.CheckConstraint(
                condition=Q(outcome__isnull=True) | Q(*[
                    Q(outcome=o, state=m.state) for o, m in OUTCOME_MEANINGS.items()],
                    _connector=Q.OR),
                name="run_outcome_of_its_state"),
        ]
        permissions = [
            ("start_run", "Can start runs"),
            ("cancel_run", "Can cancel runs"),
            ("debug_run", "Can set breakpoints, continue and step runs"),
            ("fork_run", "Can fork runs and edit their state"),
        ]

    def __str__(self) -> str:
        return f"{self.graph} {str(self.id)[:8]} ({self.state})"

    @property
    def told(self) -> Told | None:
        """Its outcome where its status alone would mislead (a failed plan, a budget that
        stopped it), as the pages tell it (:func:`dashboard.runs.outcome.told`)."""
        return told(outcome=self.outcome, reason=self.outcome_reason, graph=self.graph)

    def last_root_checkpoint(self) -> str:
        """The run's newest root checkpoint ("" before it wrote one)."""
        found = (self.events.filter(kind=RunEvent.Kind.CHECKPOINT, namespace="")
                 .order_by("-seq").values_list("checkpoint_id", flat=True).first())
        return found or ""

    # by the status, which a doorbell's summary of a run carries too (a run made of one
    # has no state); a final or an active state is shown as a status of its own

    @property
    def is_finished(self) -> bool:
        """Whether the run has reached a final state."""
        return self.status in self.FINISHED

    @property
    def is_active(self) -> bool:
        """Whether an executor holds the run or is to take it (queued or running)."""
        return self.is_active_status(self.status)

    @classmethod
    def is_active_status(cls, status: str | None) -> bool:
        """:attr:`is_active` for a status alone (a doorbell's summary of a run, say)."""
        return status in cls.ACTIVE

    def is_busy(self) -> bool:
        """:meth:`RunQuerySet.busy` for this run: it executes, waits to, or is about to
        resume."""
        return self.state in states.BUSY

    def allows(self, transition: states.Transition) -> bool:
        """Whether ``transition`` is declared from the run's state (as last read)."""
        return states.allows(self.state, transition)

    @property
    def spec(self) -> GraphSpec:
        """Its graph's declaration in the registry (``KeyError`` naming the registered ones
        when the graph is no longer served)."""
        return get_graph(self.graph)

    def current_langgraph_run(self) -> LangGraphRun:
        """Its LangGraph run now: the one that made it, or the last resume or continue; a
        run made outside the store (as some tests make one) has none recorded: its first,
        as the store would have written it (its own id, as :meth:`langgraph_run_ids`)."""
        found = self.langgraph_runs.current().first()
        return found if found is not None else LangGraphRun.first_of(self)

    def langgraph_run_ids(self) -> list[str]:
        """The ids of its LangGraph runs, the current one first: its checkpoints are those
        whose metadata ``run_id`` names one of them (a run made outside the store, as some
        tests make one, has none recorded: its own id)."""
        ids = self.langgraph_runs.order_by("-first_seq").values_list("id", flat=True)
        return [str(i) for i in ids] or [str(self.id)]

    @property
    def creator_name(self) -> str:
        """Who started the run, even after their account was deleted ("" if nobody)."""
        return self.created_by.get_username() if self.created_by else self.created_by_name


class LangGraphRunQuerySet(models.QuerySet["LangGraphRun"]):
    """The questions about LangGraph runs, asked in SQL."""

    def current(self) -> LangGraphRunQuerySet:
        """The current LangGraph run of each ``Run``: its latest (none went on after it)."""
        return self.filter(superseded_at__isnull=True)

    def to_roll_back(self) -> LangGraphRunQuerySet:
        """Those a client asked to roll back, not rolled back yet (it happens once their
        ``Run`` stopped: :func:`dashboard.runs.store.roll_back_requested`)."""
        return self.filter(rollback_requested_at__isnull=False)

    def with_langgraph_status(self, status: str) -> LangGraphRunQuerySet:
        """Those whose LangGraph status is ``status`` (:func:`states.langgraph_status`)."""
        current = Q(superseded_at__isnull=True, run__state__in=states.langgraph_states(status))
        if status == states.SUPERSEDED_LANGGRAPH_STATUS:
            return self.filter(current | Q(superseded_at__isnull=False))
        return self.filter(current)


class LangGraphRun(models.Model):
    """One run request of LangGraph's API (``/langgraph/``: start, resume, continue past a
    breakpoint, fork, next input, cron fire): what ``runs.list``, ``join``, ``stream`` and
    ``cancel`` name. A :class:`Run` (the operator's unit) is one or more of them, one after
    another: the one that made it (the same id as the ``Run``), then one per resume or
    continue. Its events are its ``Run``'s from ``first_seq`` to the last before the next
    one's; its checkpoints are those whose metadata ``run_id`` names it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="langgraph_runs",
                            help_text="The operator's run it is a part of.")
    first_seq = models.PositiveIntegerField(
        help_text="The first seq of its Run's event log that is its (the one after the "
                  "request).")
    created_at = models.DateTimeField(default=timezone.now)
    superseded_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the next LangGraph run of its Run went on after it (a resume or a "
                  "continue); null while it is the latest.")
    # what a rollback of it returns its Run to (dashboard.runs.states.ROLL_BACK)
    went_on_from = models.CharField(
        max_length=16, blank=True, choices=[(s.value, s.label) for s in states.WAITED],
        help_text="Where its Run waited when it went on: interrupted (a resume: answered) or "
                  "paused (a continue past a breakpoint); blank for the one that made it.")
    rollback_requested_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When a client asked to roll it back (cancel with action=rollback): done "
                  "once its Run stopped, by whoever sees it stop.")

    objects = LangGraphRunQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]  # a Run's, in the order they were requested
        constraints = [
            models.UniqueConstraint(fields=["run", "first_seq"],
                                    name="langgraphrun_run_first_seq_unique"),
            # one latest LangGraph run per Run, whatever the race
            models.UniqueConstraint(fields=["run"], condition=Q(superseded_at__isnull=True),
                                    name="langgraphrun_one_latest_per_run"),
            models.CheckConstraint(
                condition=Q(went_on_from__in=["", *states.WAITED]),
                name="langgraphrun_went_on_from_valid"),
        ]
        # the recovery sweep asks for the rollbacks not done yet, every few seconds
        indexes = [models.Index(fields=["rollback_requested_at"],
                                condition=Q(rollback_requested_at__isnull=False),
                                name="langgraphrun_to_roll_back")]

    def __str__(self) -> str:
        return f"LangGraph run {str(self.id)[:8]} of {self.run_id}"

    @classmethod
    def first_of(cls, run: Run) -> LangGraphRun:
        """``run``'s first LangGraph run, as the store writes it with a new run (its id)."""
        return cls(id=run.id, run=run, first_seq=1, created_at=run.created_at)

    @property
    def is_first(self) -> bool:
        """Whether it made its ``Run`` (it has the ``Run``'s id)."""
        return self.id == self.run_id

    @property
    def is_current(self) -> bool:
        """Whether it is its ``Run``'s current one, the latest (no other went on after it)."""
        return self.superseded_at is None

    @property
    def langgraph_status(self) -> str:
        """Its status as LangGraph's server names run statuses."""
        return states.langgraph_status(self.run.state, superseded=not self.is_current)

    def is_busy(self) -> bool:
        """Whether it executes, waits to, or is about to: its ``Run`` is busy and it is the
        ``Run``'s current one."""
        return self.is_current and self.run.is_busy()

    def last_seq(self) -> int:
        """The last seq of its events so far (the ``Run``'s, while it is the current one)."""
        if self.is_current:
            return int(self.run.last_seq)
        after = (LangGraphRun.objects.filter(run_id=self.run_id, first_seq__gt=self.first_seq)
                 .order_by("first_seq").values_list("first_seq", flat=True).first())
        return int(after) - 1 if after is not None else int(self.run.last_seq)


class RunEvent(models.Model):
    """One transition of a run; ``seq`` is gapless and unique per run."""

    class Kind(models.TextChoices):
        RUN_STARTED = "run_started", "Run started"
        RUN_RESUMED = "run_resumed", "Run resumed"
        RUN_RECOVERED = "run_recovered", "Run recovered"  # picked up after a dead executor
        RUN_SUCCEEDED = "run_succeeded", "Run succeeded"
        RUN_FAILED = "run_failed", "Run failed"
        RUN_CANCELLED = "run_cancelled", "Run cancelled"
        RUN_PAUSED = "run_paused", "Run paused"  # stopped at a breakpoint
        RUN_FORKED = "run_forked", "Run forked"  # first event of a fork: from where, edits
        BREAKPOINTS_CHANGED = "breakpoints_changed", "Breakpoints changed"
        RUN_CONTINUED = "run_continued", "Run continued"  # an operator's continue or step
        NODE_STARTED = "node_started", "Node started"
        NODE_FINISHED = "node_finished", "Node finished"
        NODE_FAILED = "node_failed", "Node failed"
        CHECKPOINT = "checkpoint", "Checkpoint"
        INTERRUPT_RAISED = "interrupt_raised", "Interrupt raised"
        INTERRUPT_ANSWERED = "interrupt_answered", "Interrupt answered"
        CUSTOM = "custom", "Custom"
        MODEL_STARTED = "model_started", "Model call started"  # a chat model or LLM call
        MODEL_FINISHED = "model_finished", "Model call finished"  # its answer, tokens, cost
        # a waiting question's deadline draws near (its people were reminded)
        QUESTION_REMINDED = "question_reminded", "Question reminded"
        # its deadline came: the escalation groups were given it (payload: groups)
        QUESTION_ESCALATED = "question_escalated", "Question escalated"
        # a budget's use reached its warning share (payload: budget {kind, limit, used})
        BUDGET_WARNING = "budget_warning", "Budget warning"
        # a budget was reached: the run pauses or stops (payload: budget, on_limit)
        BUDGET_REACHED = "budget_reached", "Budget reached"
        # an operator raised a paused run's budget (payload: by, extend, budget)
        BUDGET_EXTENDED = "budget_extended", "Budget extended"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=24, choices=Kind.choices)
    node = models.CharField(max_length=200, blank=True)
    namespace = models.CharField(max_length=500, blank=True)
    step = models.IntegerField(null=True, blank=True)
    task_id = models.CharField(max_length=100, blank=True)
    checkpoint_id = models.CharField(max_length=100, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    # when the thing happened (a node's start or end as its task ran, a model call's start or
    # end as its callbacks said, a question asked or answered); rows are written behind, a
    # batch at a time, so ``created_at`` is only when the row was written
    at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="runevent_run_seq_unique"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="runevent_seq_positive"),
        ]
        indexes = [
            models.Index(fields=["run", "kind", "seq"], name="runevent_run_kind_seq"),
            models.Index(fields=["node"], name="runevent_node"),
            # the budget events to notify of (a few rows: the notices' loop reads them)
            models.Index(fields=["at"], name="runevent_budget_at", condition=Q(
                kind__in=["budget_warning", "budget_reached"])),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind} {self.node}".strip()


class InterruptQuerySet(models.QuerySet["Interrupt"]):
    """Questions about interrupts, asked in SQL."""

    def unconsumed(self) -> InterruptQuerySet:
        """Answered, but the answer not yet taken up by an executor (it stamps
        ``taken_up_at`` when it takes it: :meth:`take_up`)."""
        return self.filter(status=Interrupt.Status.ANSWERED, taken_up_at__isnull=True)

    def take_up(self, checkpoint_id: str) -> int:
        """Mark these answers taken up by an executor resuming from ``checkpoint_id``
        ("" before the run wrote a root checkpoint); returns how many."""
        return self.update(checkpoint_id=checkpoint_id, taken_up_at=timezone.now())


class Interrupt(models.Model):
    """A question a run asked through LangGraph's ``interrupt()``, and its answer."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # waiting for an operator
        ANSWERED = "answered", "Answered"  # answered once; the run was resumed with it
        CANCELLED = "cancelled", "Cancelled"  # the run was cancelled or moved on
        EXPIRED = "expired", "Expired"  # its deadline passed: its run was cancelled for it

    class Channel(models.TextChoices):
        PAGE = "page", "Dashboard form"  # an operator on the run's or the inbox's form
        INBOX_MANY = "inbox_many", "Inbox, answered with others"  # one answer, many runs
        API = "api", "REST API"  # a client of /api/ (a script, a token)
        LANGGRAPH = "langgraph", "LangGraph API"  # the SDK, Agent Chat UI, Studio
        AGENT_INBOX = "agent_inbox", "Agent Inbox review"  # a HumanResponse to a review
        DEADLINE = "deadline", "Deadline default"  # its deadline passed: the graph's default

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="interrupts")
    interrupt_id = models.CharField(max_length=100)
    node = models.CharField(max_length=200, blank=True)
    namespace = models.CharField(max_length=500, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    answer = models.JSONField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="answered_interrupts",
    )
    answered_by_name = models.CharField(max_length=150, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_via = models.CharField(max_length=16, choices=Channel.choices, blank=True,
                                    help_text="Where the answer came from (blank: not known).")
    answer_key = models.CharField(
        max_length=64, blank=True,
        help_text="The key its sender gave the answer (a page's form): the same answer sent "
                  "again with it is applied once and reported as recorded.")
    checkpoint_id = models.CharField(
        max_length=100, blank=True, help_text="The checkpoint the answer resumed from."
    )
    taken_up_at = models.DateTimeField(
        null=True, blank=True, help_text="When an executor took the answer up and resumed.")
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="assigned_interrupts",
        help_text="Who took the question (\"I'm on it\") or was given it by a lead.")
    assigned_at = models.DateTimeField(null=True, blank=True)
    assigned_by_name = models.CharField(max_length=150, blank=True,
                                        help_text="Who took or gave it (kept past the account).")
    # its deadline (planner.spec.QuestionDeadline, resolved when asked; null: none), the
    # times it brings, and when each was acted on (each claimed once, by a conditional UPDATE)
    deadline = models.JSONField(null=True, blank=True,
                                help_text="Its deadline as declared when it was asked.")
    remind_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="When the deadline's outcome applies, unanswered.")
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(
        null=True, blank=True, help_text="When its notices were queued (dashboard.notices).")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = InterruptQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "interrupt_id"], name="interrupt_run_interrupt_unique"
            ),
            models.CheckConstraint(
                condition=~Q(status="answered") | Q(answered_at__isnull=False),
                name="interrupt_answered_has_time",
            ),
        ]
        indexes = [models.Index(fields=["status", "created_at"], name="interrupt_status_created"),
                   models.Index(fields=["status", "expires_at"], name="interrupt_status_expires")]
        permissions = [("answer_interrupt", "Can answer interrupts"),
                       ("assign_interrupt", "Can give a question to another operator")]

    def __str__(self) -> str:
        return f"{self.payload.get('field') or self.node} ({self.status})"

    @property
    def answerer_name(self) -> str:
        """Who answered, even after their account was deleted ("" if nobody yet); "the
        deadline" for a default its deadline applied."""
        if self.answered_via == self.Channel.DEADLINE:
            return "the deadline"
        return self.answered_by.get_username() if self.answered_by else self.answered_by_name

    @property
    def group_names(self) -> list[str]:
        """The auth groups whose members answer it ([]: anyone who may answer)."""
        return sorted(g.name for g in self.answer_groups.all())


class InterruptGroup(models.Model):
    """An auth group (by name) whose members answer a question; a question with none is
    answered by anyone with the answer permission. Written when the question is recorded,
    from the graph's declaration (``GraphSpec.question_groups``) or the question's value."""

    interrupt = models.ForeignKey(Interrupt, on_delete=models.CASCADE,
                                  related_name="answer_groups")
    name = models.CharField(max_length=150)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["interrupt", "name"],
                                               name="interrupt_group_unique")]
        indexes = [models.Index(fields=["name", "interrupt"], name="interrupt_group_name")]

    def __str__(self) -> str:
        return self.name


from dashboard.models_checkpoints import Checkpoint  # noqa: E402, F401  (unmanaged, read-only)
from dashboard.models_langgraph import (  # noqa: E402, F401
    Assistant,
    AssistantVersion,
    Cron,
    StoreItem,
    StoreOwner,
)
from dashboard.models_notices import Notice  # noqa: E402, F401
