"""API views: parse with a serializer, call a service or selector, render. Nothing else."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer, Serializer
from rest_framework.views import APIView

from dashboard import comparisons, policy, selectors, services
from dashboard.api import serializers as s
from dashboard.api.pagination import (
    EventCursorPagination,
    InterruptCursorPagination,
    RunCursorPagination,
)
from dashboard.api.permissions import (
    CanAnswerInterrupts,
    CanCancelRuns,
    CanDebugRuns,
    CanForkRuns,
    CanStartRuns,
)
from dashboard.checkpoints import checkpoint_get, checkpoint_list
from dashboard.models import Interrupt, Run
from dashboard.web.presentation import exports, trace
from dashboard.web.presentation.history import history_row
from planner.registry import all_graphs, get_graph


def validated(serializer_class: type[Serializer], data: Any) -> dict[str, Any]:
    """``data`` checked by ``serializer_class``; a ValidationError (400) names the field."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def run_or_404(request: Request, pk: str) -> Run:
    """The run ``pk`` through the selector, or a 404 that names it (also for a run the
    user may not read: :mod:`dashboard.policy`)."""
    try:
        run = selectors.run_get(run_id=pk)
    except (Run.DoesNotExist, ValueError, DjangoValidationError):
        raise NotFound(f"no run {pk!r}; list runs at /api/runs/") from None
    if not selectors.run_can_view(user=request.user, run=run):
        raise NotFound(f"no run {pk!r}; list runs at /api/runs/")
    return run


class ApiViewSet(viewsets.GenericViewSet):
    """Base: signed in for everything (DRF's views stand outside Django's login redirect)."""

    action_permissions: dict[str, list[type[BasePermission]]] = {}

    # What a POST body of an action looks like (the browsable API's form shows it; its
    # list page offers the create form).
    body_serializers: dict[str, type[Serializer]] = {}

    def get_permissions(self) -> list[BasePermission]:
        """Signed in for everything, plus the action's own permission."""
        extra = self.action_permissions.get(self.action or "", [])
        return [IsAuthenticated(), *(permission() for permission in extra)]

    def get_serializer_class(self) -> type[BaseSerializer[Any]]:
        """The action's body serializer for POST, else the representation's."""
        if self.request is not None and self.request.method == "POST" \
                and self.action in self.body_serializers:
            return self.body_serializers[self.action]
        return super().get_serializer_class()


RUN_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)


@extend_schema(tags=["runs"])
class RunViewSet(ApiViewSet):
    """Runs: list, start, read, cancel; their events and checkpoints."""

    serializer_class = s.RunSerializer
    body_serializers = {"list": s.RunCreateSerializer, "create": s.RunCreateSerializer,
                        "breakpoints": s.BreakpointsSerializer,
                        "resume": s.ContinueSerializer, "fork": s.ForkSerializer,
                        "budget": s.BudgetSerializer, "fork_ways": s.ForkWaysSerializer}
    pagination_class = RunCursorPagination
    action_permissions = {"create": [CanStartRuns], "cancel": [CanCancelRuns],
                          "breakpoints": [CanDebugRuns], "resume": [CanDebugRuns],
                          "budget": [CanCancelRuns],
                          "fork": [CanForkRuns], "fork_ways": [CanForkRuns]}

    def get_queryset(self) -> QuerySet[Run]:
        """The runs the user may read (the browsable API asks for it; the actions call the
        selectors)."""
        return selectors.run_list(user=self.request.user)

    @extend_schema(parameters=[s.RunFilterSerializer])
    def list(self, request: Request) -> Response:
        """Runs, newest first, filtered by graph, status, outcome, creator, text and start
        days."""
        filters = validated(s.RunFilterSerializer, request.query_params)
        runs = selectors.run_list(user=request.user, graph=filters["graph"],
                                  status=filters.get("status", ""),
                                  outcome=filters.get("outcome", ""),
                                  created_by=filters["creator"], q=filters["q"],
                                  since=filters["since"], until=filters["until"],
                                  budget=filters["budget"])
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(s.RunSerializer(page, many=True).data)

    @extend_schema(request=s.RunCreateSerializer, responses={201: s.RunSerializer})
    def create(self, request: Request) -> Response:
        """Start a run of a registered graph (the input is checked by the graph)."""
        data = validated(s.RunCreateSerializer, request.data)
        run = services.run_create(graph=data["graph"], input=data["input"], user=request.user,
                                  options=services.RunOptions(
                                      interrupt_before=data["interrupt_before"],
                                      interrupt_after=data["interrupt_after"],
                                      budget=data["budget"]))
        return Response(s.RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[RUN_ID], responses={200: s.RunDetailSerializer})
    def retrieve(self, request: Request, pk: str) -> Response:
        """One run, with its model calls, tokens and cost per node."""
        run = run_or_404(request, pk)
        run.model_usage = selectors.model_usage_by_node(run_id=run.id)  # type: ignore[attr-defined]
        figures = selectors.run_figures(run_id=run.id)
        run.figures = figures.as_dict()  # type: ignore[attr-defined]
        run.budget_view = selectors.run_budget(  # type: ignore[attr-defined]
            run=run, figures=figures)
        return Response(s.RunDetailSerializer(run).data)

    @extend_schema(parameters=[RUN_ID], responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"], pagination_class=None)
    def export(self, request: Request, pk: str) -> StreamingHttpResponse:
        """The whole run as one versioned JSON document (docs/export.md), streamed."""
        return StreamingHttpResponse(exports.arun_export_json(run=run_or_404(request, pk)),
                                     content_type="application/json")

    @extend_schema(parameters=[RUN_ID], request=None, responses={200: s.RunSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a queued, running or interrupted run (409 if it has finished)."""
        run = services.run_cancel(run=run_or_404(request, pk), user=request.user)
        return Response(s.RunSerializer(run).data)

    @extend_schema(parameters=[RUN_ID], request=s.BudgetSerializer,
                   responses={200: s.RunSerializer})
    @action(detail=True, methods=["post"])
    def budget(self, request: Request, pk: str) -> Response:
        """Answer a run paused at its budget: ``extend`` it and go on, or ``stop`` it."""
        data = validated(s.BudgetSerializer, request.data)
        run = run_or_404(request, pk)
        if data["stop"]:
            run = services.run_budget_stop(run=run, user=request.user)
        else:
            run = services.run_budget_extend(run=run, extend=data["extend"], user=request.user)
        return Response(s.RunSerializer(run).data)

    @extend_schema(parameters=[RUN_ID], request=s.BreakpointsSerializer,
                   responses={200: s.RunSerializer})
    @action(detail=True, methods=["post"])
    def breakpoints(self, request: Request, pk: str) -> Response:
        """Set the nodes the run pauses before or after (a running run: at its next node)."""
        data = validated(s.BreakpointsSerializer, request.data)
        run = services.run_breakpoints_set(
            run=run_or_404(request, pk), interrupt_before=data["interrupt_before"],
            interrupt_after=data["interrupt_after"], user=request.user)
        return Response(s.RunSerializer(run).data)

    @extend_schema(parameters=[RUN_ID], request=s.ContinueSerializer,
                   responses={200: s.RunSerializer})
    @action(detail=True, methods=["post"], url_path="continue")
    def resume(self, request: Request, pk: str) -> Response:
        """Continue a run paused at a breakpoint (``step``: one super-step, then pause)."""
        data = validated(s.ContinueSerializer, request.data)
        run = services.run_continue(run=run_or_404(request, pk), user=request.user,
                                    step=data["step"])
        return Response(s.RunSerializer(run).data)

    @extend_schema(parameters=[RUN_ID], request=s.ForkSerializer,
                   responses={201: s.RunSerializer})
    @action(detail=True, methods=["post"])
    def fork(self, request: Request, pk: str) -> Response:
        """Start a new run from one of this run's checkpoints, with its state edited first."""
        body = s.ForkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        child = services.run_fork(run=run_or_404(request, pk), checkpoint_id=data["checkpoint_id"],
                                  values=data["values"], as_node=data["as_node"],
                                  user=request.user, options=services.RunOptions(
                                      model_settings=body.model_settings()))
        return Response(s.RunSerializer(child).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[RUN_ID], request=s.ForkWaysSerializer,
                   responses={201: s.RunSerializer(many=True)})
    @action(detail=True, methods=["post"], url_path="fork-ways")
    def fork_ways(self, request: Request, pk: str) -> Response:
        """Start one fork per model choice from one checkpoint (all or none), to compare
        them (``GET /api/runs/compare/?runs=…``)."""
        data = validated(s.ForkWaysSerializer, request.data)
        forks = services.run_fork_ways(run=run_or_404(request, pk),
                                       checkpoint_id=data["checkpoint_id"],
                                       user=request.user, ways=data["ways"])
        return Response(s.RunSerializer(forks, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[s.CompareFilterSerializer],
                   responses={200: s.CompareColumnSerializer(many=True)})
    @action(detail=False, methods=["get"], pagination_class=None)
    def compare(self, request: Request) -> Response:
        """Runs side by side (the first is the reference): outcome, result, the first
        decision that differs, model calls, tokens, cost, working and wall time."""
        ids = validated(s.CompareFilterSerializer, request.query_params)["runs"]
        runs = [run_or_404(request, str(pk)) for pk in dict.fromkeys(ids)]
        columns = comparisons.runs_compare(runs=runs)
        return Response(s.CompareColumnSerializer(
            [{**vars(c), "figures": c.figures.as_dict()} for c in columns], many=True).data)

    @extend_schema(parameters=[RUN_ID, s.EventFilterSerializer],
                   responses={200: s.RunEventSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=EventCursorPagination)
    def events(self, request: Request, pk: str) -> Response:
        """The run's events after ``after``, in seq order."""
        after = validated(s.EventFilterSerializer, request.query_params)["after"]
        run = run_or_404(request, pk)
        page = self.paginate_queryset(selectors.run_events(run_id=run.id, after=after))
        return self.get_paginated_response(s.RunEventSerializer(page, many=True).data)

    @extend_schema(parameters=[RUN_ID, s.CheckpointFilterSerializer],
                   responses={200: s.CheckpointSummarySerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None)
    def checkpoints(self, request: Request, pk: str) -> Response:
        """The run's LangGraph checkpoints, newest first (no values; read one for those)."""
        filters = validated(s.CheckpointFilterSerializer, request.query_params)
        run = run_or_404(request, pk)
        views = checkpoint_list(thread_id=run.thread_id, checkpoint_ns=filters["ns"],
                                limit=filters["limit"], run_ids=run.langgraph_run_ids())
        return Response(s.CheckpointSummarySerializer(views, many=True).data)

    @extend_schema(
        parameters=[RUN_ID, OpenApiParameter("checkpoint_id", str, OpenApiParameter.PATH),
                    OpenApiParameter("ns", str, description="Checkpoint namespace (empty: the "
                                     "root graph).")],
        responses={200: s.CheckpointSerializer},
    )
    @action(detail=True, methods=["get"], pagination_class=None,
            url_path=r"checkpoints/(?P<checkpoint_id>[^/]+)")
    def checkpoint(self, request: Request, pk: str, checkpoint_id: str) -> Response:
        """One checkpoint of the run, its values decoded by the saver's own serializer."""
        ns = request.query_params.get("ns", "")
        lookup = validated(s.CheckpointLookupSerializer, {"checkpoint_id": checkpoint_id, "ns": ns})
        run = run_or_404(request, pk)
        view = checkpoint_get(thread_id=run.thread_id, checkpoint_id=lookup["checkpoint_id"],
                              checkpoint_ns=lookup["ns"])
        if view is None:
            raise NotFound(f"run {run.id} has no checkpoint {checkpoint_id!r} in namespace "
                           f"{ns!r}; list them at /api/runs/{run.id}/checkpoints/")
        return Response(s.CheckpointSerializer(view).data)


@extend_schema(tags=["interrupts"])
class InterruptViewSet(ApiViewSet):
    """Interrupts: the pending ones, any one, and answering it."""

    serializer_class = s.InterruptSerializer
    body_serializers = {"answer": s.InterruptAnswerSerializer}
    pagination_class = InterruptCursorPagination
    action_permissions = {"answer": [CanAnswerInterrupts]}

    def get_queryset(self) -> QuerySet[Interrupt]:
        """The pending interrupts (the browsable API asks for it)."""
        return selectors.interrupts_pending(user=self.request.user)

    @extend_schema(parameters=[s.InterruptFilterSerializer])
    def list(self, request: Request) -> Response:
        """Pending interrupts, oldest first, filtered by run and graph."""
        filters = validated(s.InterruptFilterSerializer, request.query_params)
        pending = selectors.interrupts_pending(user=request.user, run_id=filters.get("run"),
                                               graph=filters["graph"])
        page = self.paginate_queryset(pending)
        return self.get_paginated_response(s.InterruptSerializer(page, many=True).data)

    @extend_schema(parameters=[s.HistoryFilterSerializer], responses={200: s.HistorySerializer})
    @action(detail=False, methods=["get"])
    def history(self, request: Request) -> Response:
        """Answered and withdrawn questions, newest first: who or what answered, the
        channel, when, how long each waited; and per graph and question the median and
        p90 time to answer (of every question the filters match)."""
        filters = validated(s.HistoryFilterSerializer, request.query_params)
        limit, offset = filters.pop("limit"), filters.pop("offset")
        found = selectors.interrupts_history(user=request.user, **filters)
        rows = [history_row(i) for i in found[offset:offset + limit]]
        return Response(s.HistorySerializer({
            "count": found.count(), "results": rows,
            "answer_times": selectors.interrupts_answer_times(found)}).data)

    @extend_schema(parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH)])
    def retrieve(self, request: Request, pk: str) -> Response:
        """One interrupt, pending or not."""
        return Response(s.InterruptSerializer(self._interrupt(request, pk)).data)

    @extend_schema(parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH)],
                   request=s.InterruptAnswerSerializer, responses={200: s.InterruptSerializer})
    @action(detail=True, methods=["post"])
    def answer(self, request: Request, pk: str) -> Response:
        """Answer an interrupt exactly once (409 if answered already or withdrawn)."""
        data = validated(s.InterruptAnswerSerializer, request.data)
        interrupt = services.interrupt_answer(interrupt=self._interrupt(request, pk),
                                              answer=data["answer"], user=request.user,
                                              via=Interrupt.Channel.API)
        return Response(s.InterruptSerializer(interrupt).data)

    @staticmethod
    def _interrupt(request: Request, pk: str) -> Interrupt:
        """The interrupt ``pk`` of a run the user may read, or 404."""
        if not (pk.isascii() and pk.isdigit()) or int(pk) > 2**63 - 1:
            raise NotFound(f"no interrupt {pk!r}; list pending ones at /api/interrupts/")
        try:
            return policy.interrupts_visible(request.user).select_related(
                "run", "answered_by").get(pk=int(pk))
        except Interrupt.DoesNotExist:
            raise NotFound(f"no interrupt {pk!r}; list pending ones at /api/interrupts/") \
                from None


@extend_schema(tags=["graphs"])
class GraphViewSet(ApiViewSet):
    """Registered planner graphs: their input and topology."""

    serializer_class = s.GraphSerializer
    pagination_class = None
    lookup_value_regex = r"[^/]+"  # graph names may contain dots (``test.echo``)

    def get_queryset(self) -> Any:
        """Nothing: graphs live in the registry, not the database."""
        return []

    @extend_schema(responses={200: s.GraphSerializer(many=True)})
    def list(self, request: Request) -> Response:
        """Every registered graph, by name."""
        return Response(s.GraphSerializer(all_graphs(), many=True).data)

    @extend_schema(parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH,
                                                description="The graph's name.")],
                   responses={200: s.GraphDetailSerializer})
    def retrieve(self, request: Request, pk: str) -> Response:
        """One graph with its input fields, nodes and edges."""
        try:
            spec = get_graph(pk)
        except KeyError as exc:
            raise NotFound(str(exc.args[0])) from None
        topology = trace.graph_topology(spec.name)
        edges = [{"source": source, "target": target, "conditional": conditional}
                 for source, target, conditional in topology.edges]
        return Response(s.GraphDetailSerializer(
            {**vars(spec), "nodes": list(topology.nodes), "edges": edges,
             "prompts": list(spec.prompts.values())}
        ).data)


@extend_schema(exclude=True)
class NotFoundView(APIView):
    """Any other path under /api/: a JSON 404 (after authentication)."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Say where the API's resources are."""
        raise NotFound(f"no API resource at {request.path!r}; see /api/docs/")

    post = put = patch = delete = get
