"""What the API reads and writes; representations of runs, events, interrupts, graphs."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from dashboard import selectors
from dashboard.models import Interrupt, LangGraphRun, Run, RunEvent
from dashboard.runs.record import event_dict

# -- input ---------------------------------------------------------------------------


def node_list() -> serializers.ListField:
    """A list of a graph's node names (each serializer field needs its own instance)."""
    return serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, default=list,
        max_length=200, help_text='Node names (see /api/graphs/<name>/), or ["*"] for every node.')


class RunCreateSerializer(serializers.Serializer):
    """Start a run: a registered graph's name and its start input (checked by the graph)."""

    graph = serializers.CharField(max_length=100, help_text="A registered graph's name.")
    input = serializers.DictField(
        required=False, default=dict,
        help_text="The graph's start input; see its input_fields at /api/graphs/<name>/.",
    )
    interrupt_before = node_list()
    interrupt_after = node_list()
    budget = serializers.JSONField(
        required=False, default=None,
        help_text='Its budgets, over the server\'s and its graph\'s, field by field: '
                  '{"max_tokens", "max_cost_usd", "max_model_calls", "max_working_minutes", '
                  '"max_wall_minutes", "on_limit": "pause" | "stop" | {by budget}, '
                  '"warn_at": 0.8}; null lifts a limit (README, "Budgets").')


class BudgetSerializer(serializers.Serializer):
    """Answer a run paused at its budget: extend it (the limits to add), or stop the run."""

    extend = serializers.JSONField(
        required=False, default=None,
        help_text='The limits to add, e.g. {"max_cost_usd": 0.5}; null lifts one.')
    stop = serializers.BooleanField(required=False, default=False,
                                    help_text="End the run (cancelled) instead.")


class BreakpointsSerializer(serializers.Serializer):
    """Nodes to pause before or after (LangGraph's interrupt_before / interrupt_after)."""

    interrupt_before = node_list()
    interrupt_after = node_list()


class ContinueSerializer(serializers.Serializer):
    """Continue a paused run to its next breakpoint, or one super-step (then pause again)."""

    step = serializers.BooleanField(required=False, default=False)


class ForkSerializer(serializers.Serializer):
    """Start a new run from one of this run's checkpoints, optionally editing its state."""

    checkpoint_id = serializers.CharField(max_length=100)
    values = serializers.JSONField(
        required=False, default=None,
        help_text="State channels to change before the fork runs, e.g. {\"price\": 40}.")
    as_node = serializers.CharField(
        max_length=200, required=False, default="", allow_blank=True,
        help_text="The node the edit is applied as (decides what runs next).")
    model = serializers.JSONField(
        required=False, default=None,
        help_text="The chat model the fork calls instead, as PLANWATCH_LLM names one: "
                  "'scripted' or 'provider:model' (openai:gpt-4o-mini); 422 if unknown.")
    temperature = serializers.JSONField(
        required=False, default=None, help_text="The model's temperature, 0 to 2.")
    max_tokens = serializers.JSONField(
        required=False, default=None,
        help_text="The most tokens each answer may take, 1 to 1,000,000.")
    prompts = serializers.JSONField(
        required=False, default=None,
        help_text="Prompt templates by the names the graph declares (see "
                  "/api/graphs/<name>/: prompts), e.g. {\"plan\": \"Plan {goal} …\"}.")

    def model_settings(self) -> dict[str, Any]:
        """The model choice as given (the graph checks it: 422 naming the field)."""
        data = self.validated_data
        return {k: data[k] for k in ("model", "temperature", "max_tokens", "prompts")
                if data.get(k) is not None}


class ForkWaysSerializer(serializers.Serializer):
    """Start several forks from one checkpoint, one per model choice, to compare them."""

    checkpoint_id = serializers.CharField(max_length=100)
    ways = serializers.ListField(
        child=serializers.DictField(), min_length=1, max_length=50,
        help_text='One model choice per fork: [{"model": "openai:gpt-4o-mini", '
                  '"temperature": 0.2}, {"model": "scripted"}, …] (2 to 8).')


class QueryFilters(serializers.Serializer):
    """Query parameters. One given empty (``?run=``) is refused, naming it, unless its field
    takes blank text: DRF reads an empty value of an optional field as left out (its rule
    for HTML forms), so ``?run=`` listed everything while the schema says a run id."""

    def to_internal_value(self, data: Any) -> Any:
        blank = [name for name, field in self.fields.items()
                 if hasattr(data, "get") and data.get(name) == ""
                 and not getattr(field, "allow_blank", False)
                 and "" not in getattr(field, "choices", {})]
        if blank:
            raise serializers.ValidationError(
                {name: [f"is empty: give a value, or leave {name} out"] for name in blank})
        return super().to_internal_value(data)


class CompareFilterSerializer(QueryFilters):
    """The runs to compare side by side."""

    runs = serializers.ListField(
        child=serializers.UUIDField(), min_length=2, max_length=12,
        help_text="Two to twelve run ids (repeat the parameter: ?runs=…&runs=…).")


class RunFilterSerializer(QueryFilters):
    """Query filters of the runs list."""

    graph = serializers.CharField(required=False, default="", allow_blank=True,
                                  max_length=100, help_text="Only runs of this graph.")
    status = serializers.ChoiceField(choices=Run.Status.choices, required=False,
                                     help_text="Only runs in this (execution) status.")
    outcome = serializers.ChoiceField(choices=Run.Outcome.choices, required=False,
                                      help_text="Only finished runs that ended so "
                                                "(plan_failed: its goal failed, though its "
                                                "graph returned).")
    creator = serializers.CharField(required=False, default="", allow_blank=True,
                                    max_length=150, help_text="Only runs by this username.")
    q = serializers.CharField(required=False, default="", allow_blank=True,
                              max_length=selectors.RUN_SEARCH_MAX,
                              help_text="Only runs whose goal contains this text (any case) "
                                        "or whose id starts with it.")
    budget = serializers.ChoiceField(choices=["reached"], required=False, default="",
                                     help_text="reached: only runs that reached one of "
                                               "their budgets (paused or stopped there).")
    since = serializers.DateField(required=False, default=None, input_formats=["%Y-%m-%d"],
                                  help_text="Only runs started on this day (YYYY-MM-DD, "
                                            "the server's time zone) or later.")
    until = serializers.DateField(required=False, default=None, input_formats=["%Y-%m-%d"],
                                  help_text="Only runs started on this day or earlier.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A date range that ends before it starts is refused (the runs list's rule)."""
        problem = selectors.run_dates_problem(since=attrs.get("since"), until=attrs.get("until"))
        if problem:
            raise serializers.ValidationError({"until": problem})
        return attrs


class EventFilterSerializer(QueryFilters):
    """Query filters of a run's events."""

    after = serializers.IntegerField(required=False, default=0, min_value=0,
                                     help_text="Only events with a seq above this one.")


class InterruptFilterSerializer(QueryFilters):
    """Query filters of the pending interrupts list."""

    run = serializers.UUIDField(required=False, help_text="Only this run's interrupts.")
    graph = serializers.CharField(required=False, default="", allow_blank=True,
                                  max_length=100, help_text="Only interrupts of this graph.")


class HistoryFilterSerializer(QueryFilters):
    """Query filters of the questions history (answered and withdrawn)."""

    q = serializers.CharField(required=False, default="", allow_blank=True, max_length=200,
                              help_text="Words of the goal or question, or a run id's start.")
    graph = serializers.CharField(required=False, default="", allow_blank=True, max_length=100)
    question = serializers.CharField(required=False, default="", allow_blank=True,
                                     max_length=1000)
    outcome = serializers.ChoiceField(required=False, default="",
                                      choices=["", "answered", "expired", "withdrawn"])
    via = serializers.ChoiceField(required=False, default="",
                                  choices=["", *Interrupt.Channel.values])
    by = serializers.CharField(required=False, default="", allow_blank=True, max_length=150)
    since = serializers.DateField(required=False, default=None, allow_null=True)
    until = serializers.DateField(required=False, default=None, allow_null=True)
    limit = serializers.IntegerField(required=False, default=50, min_value=1, max_value=500)
    offset = serializers.IntegerField(required=False, default=0, min_value=0,
                                      max_value=10_000_000)


class HistoryRowSerializer(serializers.Serializer):
    """One question that no longer waits."""

    id = serializers.IntegerField()
    run = serializers.UUIDField()
    graph = serializers.CharField()
    question = serializers.CharField()
    outcome = serializers.ChoiceField(choices=["answered", "expired", "withdrawn"])
    answer = serializers.JSONField(allow_null=True)
    answered_by = serializers.CharField(allow_blank=True)
    channel = serializers.CharField(allow_blank=True)
    asked_at = serializers.DateTimeField()
    answered_at = serializers.DateTimeField(allow_null=True)
    deadline_at = serializers.DateTimeField(
        allow_null=True, help_text="Its deadline, if it had one (expired: nobody answered).")
    waited_seconds = serializers.FloatField(allow_null=True)


class AnswerTimesSerializer(serializers.Serializer):
    """How long one question of a graph waited for its answers (nearest-rank p90)."""

    graph = serializers.CharField()
    question = serializers.CharField()
    answered = serializers.IntegerField()
    median_seconds = serializers.FloatField()
    p90_seconds = serializers.FloatField()


class HistorySerializer(serializers.Serializer):
    """A page of the history, its total, and the answer times of all it matched."""

    count = serializers.IntegerField()
    results = HistoryRowSerializer(many=True)
    answer_times = AnswerTimesSerializer(many=True)


class InterruptAnswerSerializer(serializers.Serializer):
    """An answer to one interrupt: any JSON value the question asks for (not null)."""

    answer = serializers.JSONField(help_text="The value asked for, e.g. \"Germany\" or 47.88.")


class CheckpointFilterSerializer(QueryFilters):
    """Which of a run's checkpoints to list."""

    ns = serializers.CharField(required=False, default="", allow_blank=True, max_length=500,
                               help_text="Checkpoint namespace (empty: the root graph).")
    limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=1000,
                                     help_text="At most this many, newest first.")


class CheckpointLookupSerializer(serializers.Serializer):
    """One checkpoint: its id (from the path) and namespace."""

    checkpoint_id = serializers.CharField(max_length=100)
    ns = serializers.CharField(required=False, default="", allow_blank=True, max_length=500,
                               help_text="Checkpoint namespace (empty: the root graph).")


# -- output --------------------------------------------------------------------------


class RunSerializer(serializers.ModelSerializer):
    """A run as the API shows it."""

    created_by = serializers.CharField(source="creator_name", read_only=True,
                                       allow_null=True)
    queue_position = serializers.IntegerField(
        read_only=True, allow_null=True, default=None,
        help_text="A queued run's place in the line for a free slot (1: next); null for "
                  "any other run.")

    outcome = serializers.ChoiceField(
        choices=Run.Outcome.choices, read_only=True, allow_null=True,
        help_text="How it ended, decided once when it stopped (null while unfinished): "
                  "plan_failed for a run whose graph returned but whose output says its goal "
                  "failed (its status stays succeeded, the execution's), budget_exceeded for "
                  "one a budget stopped (its status cancelled).")
    outcome_reason = serializers.CharField(
        read_only=True, help_text="Why it ended so: the plan's failure, the error, who "
                                  "cancelled it, the budget's figure (\"\" for a goal met).")

    class Meta:
        model = Run
        fields = ["id", "graph", "graph_version", "thread_id", "status", "outcome",
                  "outcome_reason", "queue_position",
                  "input", "output",
                  "error_message", "current_node", "created_by", "created_at", "started_at",
                  "finished_at", "last_seq", "cancel_requested", "interrupt_before",
                  "interrupt_after", "parent", "forked_from_checkpoint", "fork_edit",
                  "model_settings",
                  "model_calls", "input_tokens", "output_tokens", "total_tokens", "cost_usd",
                  "budget"]
        read_only_fields = fields



class NodeUsageSerializer(serializers.Serializer):
    """A node's model calls: how many, tokens as reported (null: not reported), cost."""

    node = serializers.CharField()
    namespace = serializers.CharField()
    model_calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    total_tokens = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True, help_text="null: unknown (no price)")
    latency_ms = serializers.FloatField(help_text="Time spent in the model, summed.")


class FiguresSerializer(serializers.Serializer):
    """A run's figures, the same the trace page, the export and the spans show."""

    working_seconds = serializers.FloatField(help_text="Time the run worked, its waits "
                                             "for people left out.")
    waiting_seconds = serializers.FloatField(help_text="Time it waited for people: answers "
                                             "and breakpoint pauses.")
    answer_wait_seconds = serializers.FloatField(help_text="Waiting for answers to questions.")
    paused_seconds = serializers.FloatField(help_text="Waiting at breakpoints.")
    model_seconds = serializers.FloatField(help_text="In model calls (parallel calls once).")
    elapsed_seconds = serializers.FloatField(help_text="From its first event to its end "
                                             "(to now while it runs or waits).")
    cost_usd = serializers.FloatField(allow_null=True, help_text="null: unknown (no price)")
    model_calls = serializers.IntegerField()


class LangGraphRunSerializer(serializers.ModelSerializer):
    """One LangGraph run of a run: a run request of LangGraph's API (its start, each
    resume or continue), as ``/langgraph/`` lists and joins it."""

    status = serializers.CharField(source="langgraph_status", read_only=True,
                                   help_text="Its status as LangGraph's server names it.")
    last_seq = serializers.IntegerField(read_only=True, help_text=(
        "The last seq of the run's event log that is its so far (its events: first_seq "
        "to last_seq)."))

    class Meta:
        model = LangGraphRun
        fields = ["id", "status", "first_seq", "last_seq", "created_at", "superseded_at"]
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    """A run with its model usage per node, its figures and its LangGraph runs."""

    model_usage = NodeUsageSerializer(many=True, read_only=True,
                                      help_text="Model calls, tokens and cost per node.")
    figures = FiguresSerializer(read_only=True, help_text="Working time, waits for people, "
                                "model time and cost, when things happened.")

    langgraph_runs = LangGraphRunSerializer(
        many=True, read_only=True,
        help_text="Its LangGraph runs, oldest first: the run request that made it (the "
                  "run's own id), then one per resume or continue.")
    budget_use = serializers.SerializerMethodField(
        help_text="Each budget and its use: [{kind, limit, used, on_limit, warned, "
                  "reached}], and paused_on: the budget it waits at (null if none).")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "model_usage", "figures", "langgraph_runs",
                  "budget_use"]
        read_only_fields = fields

    def get_budget_use(self, run: Run) -> dict[str, Any] | None:
        """The run's budgets and their use (None: it has none)."""
        found = getattr(run, "budget_view", None)
        if found is None:
            return None
        return {"uses": [use.as_dict() for use in found.uses], "paused_on": found.paused_on}


class RunEventSerializer(serializers.ModelSerializer):
    """One event, in exactly the form the websocket broadcasts it."""

    class Meta:
        model = RunEvent
        fields = ["seq", "kind", "node", "namespace", "step", "task_id", "checkpoint_id",
                  "payload", "duration_ms", "created_at", "at"]
        read_only_fields = fields

    def to_representation(self, instance: RunEvent) -> dict[str, Any]:
        """The runner's ``event_dict``: one representation for websocket and API."""
        return event_dict(instance)


class InterruptSerializer(serializers.ModelSerializer):
    """An interrupt: the question (payload), and its answer once given."""

    run = serializers.UUIDField(source="run_id", read_only=True)
    graph = serializers.CharField(source="run.graph", read_only=True)
    answered_by = serializers.CharField(source="answerer_name", read_only=True,
                                        allow_null=True)
    groups = serializers.ListField(source="group_names", child=serializers.CharField(),
                                   read_only=True,
                                   help_text="Groups whose members answer it ([]: anyone).")
    assigned_to = serializers.CharField(source="assigned_to.username", read_only=True,
                                        allow_null=True, default=None)
    answered_via = serializers.ChoiceField(
        choices=Interrupt.Channel.choices, allow_blank=True, read_only=True,
        help_text="Where the answer came from (\"\": not answered, or before it was recorded).")

    class Meta:
        model = Interrupt
        fields = ["id", "run", "graph", "interrupt_id", "node", "namespace", "payload",
                  "status", "answer", "answered_by", "answered_at", "answered_via",
                  "checkpoint_id", "created_at", "groups", "assigned_to"]
        read_only_fields = fields


class CheckpointSummarySerializer(serializers.Serializer):
    """One checkpoint in a list (no values)."""

    thread_id = serializers.CharField()
    checkpoint_ns = serializers.CharField(allow_blank=True)
    checkpoint_id = serializers.CharField()
    parent_id = serializers.CharField(allow_null=True)
    created_at = serializers.CharField(allow_blank=True)
    step = serializers.IntegerField(allow_null=True)
    source = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # the wire name shadows a DRF attribute
    metadata = serializers.DictField()


class CheckpointSerializer(CheckpointSummarySerializer):
    """One checkpoint, decoded by the saver's own serializer."""

    values = serializers.DictField()
    pending_writes = serializers.ListField(child=serializers.DictField())


class InputFieldSerializer(serializers.Serializer):
    """One field of a graph's start input."""

    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # the wire name shadows a DRF attribute
    kind = serializers.CharField()
    required = serializers.BooleanField()  # type: ignore[assignment]  # the wire name shadows a DRF attribute
    default = serializers.JSONField(allow_null=True)
    help = serializers.CharField(allow_blank=True)
    choices = serializers.ListField(child=serializers.CharField())
    min_value = serializers.FloatField(allow_null=True)
    max_value = serializers.FloatField(allow_null=True)


class GraphSerializer(serializers.Serializer):
    """A registered graph in the list."""

    name = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField()
    version = serializers.IntegerField()
    tags = serializers.ListField(child=serializers.CharField())
    input_fields = InputFieldSerializer(many=True)


class EdgeSerializer(serializers.Serializer):
    """One edge of a graph's topology."""

    source = serializers.CharField()  # type: ignore[assignment]  # the wire name shadows a DRF attribute
    target = serializers.CharField()
    conditional = serializers.BooleanField()


class PromptSerializer(serializers.Serializer):
    """A prompt the graph declares, which a fork may replace by name."""

    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # the wire name shadows a DRF attribute
    template = serializers.CharField(help_text="Its text; {field} placeholders are filled.")
    fields = serializers.ListField(child=serializers.CharField(),  # type: ignore[assignment]  # the wire name shadows a DRF attribute
                                   help_text="The placeholders a template may use.")
    help = serializers.CharField()


class GraphDetailSerializer(GraphSerializer):
    """A registered graph with its topology, and what a fork may change of its model calls."""

    nodes = serializers.ListField(child=serializers.CharField())
    edges = EdgeSerializer(many=True)
    prompts = PromptSerializer(many=True, help_text="Its prompts a fork may replace.")
    takes_model = serializers.BooleanField(
        help_text="Whether a fork may choose another model (its calls go through "
                  "Planwatch's model port).")


class CompareColumnSerializer(serializers.Serializer):
    """One run of a comparison: its outcome, result, first divergent decision and figures."""

    run = RunSerializer()
    reference = serializers.BooleanField(help_text="The run the others are compared with.")
    outcome = serializers.CharField(help_text="succeeded, failed (its goal or its graph), "
                                    "cancelled, or its status while it has not ended.")
    result = serializers.CharField(help_text="Its result's headline, or why there is none.")
    models = serializers.ListField(child=serializers.CharField(),
                                   help_text="The models its calls really used.")
    decisions = serializers.IntegerField(help_text="Decisions it made.")
    divergence = serializers.IntegerField(
        allow_null=True, help_text="The index of its first decision that differs from the "
        "reference run's (null: none differs; the reference's own is null).")
    divergent_decision = serializers.JSONField(help_text="That decision (null: none).")
    reference_decision = serializers.JSONField(
        help_text="The reference run's decision at the same index (null: it made none).")
    figures = FiguresSerializer()
    total_tokens = serializers.IntegerField(allow_null=True)
    active = serializers.BooleanField(help_text="It has not ended: its figures still move.")


class ErrorSerializer(serializers.Serializer):
    """Every error: ``detail`` says what is wrong and names the field; ``errors`` per field."""

    detail = serializers.CharField()
    code = serializers.CharField()
    errors = serializers.DictField(child=serializers.CharField())  # type: ignore[assignment]  # the wire name shadows a DRF attribute
