"""Debugging pages: breakpoints, continue and step, forks with an edited state, branches.

Each view parses, calls a service or selector, and renders; the permissions are
``dashboard.debug_run`` (breakpoints, continue, step) and ``dashboard.fork_run`` (forks and
state edits).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from dashboard import comparisons, selectors, services, thread_runs
from dashboard.checkpoints import checkpoint_get, run_checkpoint, values_diff
from dashboard.models import Run, RunEvent
from dashboard.web.forms.debug import (
    BreakpointsForm,
    ForkWaysForm,
    ModelSettingsForm,
    StateEditForm,
)
from dashboard.web.htmx import HtmxHttpRequest
from dashboard.web.presentation import results
from dashboard.web.presentation.trace import pretty
from dashboard.web.views.common import run_or_404

DEBUG, FORK = "dashboard.debug_run", "dashboard.fork_run"



def _need(request: HttpRequest, perm: str, what: str) -> None:
    if not request.user.has_perm(perm):
        raise PermissionDenied(f"{what} needs the {perm!r} permission; ask an administrator")


def debug_context(*, request: HttpRequest, run: Run) -> dict[str, Any]:
    """What the trace page's debugging panel renders: breakpoints, pause, branches."""
    try:
        schema = selectors.graph_debug_schema(graph=run.graph)
    except KeyError:
        return {"debug_available": False}
    paused = (selectors.run_events(run_id=run.id).filter(kind=RunEvent.Kind.RUN_PAUSED)
              .order_by("-seq").first() if run.status == Run.Status.PAUSED else None)
    reached = paused.payload.get("budget") if paused is not None and isinstance(
        paused.payload, dict) else None
    # paused: what the next node will work on, at the checkpoint the run stands on
    checkpoint_id = run.last_root_checkpoint() if paused is not None else ""
    state = checkpoint_get(thread_id=run.thread_id, checkpoint_id=checkpoint_id) \
        if checkpoint_id else None
    return {
        "debug_available": True,
        "paused_state": state,
        "paused_state_json": pretty(state.values) if state else "",
        "breakpoints_form": BreakpointsForm(nodes=schema.nodes, initial={
            "interrupt_before": run.interrupt_before, "interrupt_after": run.interrupt_after}),
        "paused_event": paused,
        # paused at its budget (dashboard/runs/budgets.py): the question, and its answer
        "paused_budget": reached,
        "paused_budget_question": selectors.budget_question(reached) if reached else "",
        "can_budget": request.user.has_perm("dashboard.cancel_run"),
        "lineage": selectors.run_lineage(run=run),
        "can_debug": request.user.has_perm(DEBUG) and not run.is_finished,
        "can_fork": request.user.has_perm(FORK),
    }


def run_debug(request: HttpRequest, run_id: UUID) -> TemplateResponse:
    """The debugging panel of a run (also refreshed after each action)."""
    run = run_or_404(request, run_id)
    return TemplateResponse(request, "dashboard/_run_debug.html",
                            {"run": run, **debug_context(request=request, run=run)})


@require_POST
def run_breakpoints(request: HtmxHttpRequest, run_id: UUID) -> HttpResponse:
    """Set the run's breakpoints (a running run takes them at its next node)."""
    run = run_or_404(request, run_id)
    _need(request, DEBUG, "setting breakpoints")
    schema = selectors.graph_debug_schema(graph=run.graph)
    form = BreakpointsForm(request.POST, nodes=schema.nodes)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}"
                                          for k, v in form.errors.items()))
    else:
        try:
            services.run_breakpoints_set(
                run=run, interrupt_before=form.cleaned_data["interrupt_before"],
                interrupt_after=form.cleaned_data["interrupt_after"], user=request.user)
        except services.ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, "Breakpoints saved.")
    return _back(request, run)


@require_POST
def run_continue(request: HtmxHttpRequest, run_id: UUID) -> HttpResponse:
    """Continue a paused run to its next breakpoint, or (``step=1``) one super-step."""
    run = run_or_404(request, run_id)
    _need(request, DEBUG, "continuing or stepping a run")
    step = request.POST.get("step") == "1"
    try:
        services.run_continue(run=run, user=request.user, step=step)
    except services.ServiceError as exc:
        messages.error(request, exc.message)
    return _back(request, run)


def run_fork(request: HttpRequest, run_id: UUID) -> TemplateResponse | HttpResponseRedirect:
    """Re-run from a checkpoint, optionally with its state edited, another model or other
    prompts first (a new run); or fork it several ways at once and compare them."""
    run = run_or_404(request, run_id)
    checkpoint_id = request.GET.get("checkpoint") or request.POST.get("checkpoint", "")
    event = (selectors.run_events(run_id=run.id)
             .filter(kind=RunEvent.Kind.CHECKPOINT, namespace="", checkpoint_id=checkpoint_id)
             .first()) if checkpoint_id else None
    if event is None:
        raise Http404(f"run {run.id} has no root checkpoint {checkpoint_id!r}; open a "
                      "checkpoint row of its timeline and choose “Re-run from here”")
    view = checkpoint_get(thread_id=run.thread_id, checkpoint_id=checkpoint_id)
    if view is None:
        raise Http404(f"checkpoint {checkpoint_id!r} is no longer stored")
    ways_post = request.method == "POST" and request.POST.get("action") == "ways"
    fork_post = request.method == "POST" and not ways_post
    form = _state_form(request, run, view.values, bound=fork_post)
    model_form = ModelSettingsForm(request.POST if fork_post else None,
                                   prompts=run.spec.prompts, takes_model=run.spec.takes_model,
                                   prefix="m")
    ways_form = ForkWaysForm(request.POST if ways_post else None, prefix="w")
    status = 200
    if ways_post:
        _need(request, FORK, "forking a run")
        if ways_form.is_valid():
            rows = ways_form.ways()
            try:
                forks = services.run_fork_ways(run=run, checkpoint_id=checkpoint_id,
                                               user=request.user, ways=[w for _, w in rows])
            except services.ModelSettingsError as exc:
                _way_errors(ways_form, rows, exc.errors)
                status = 422
            else:
                messages.success(request, f"Forked {len(forks)} ways from checkpoint "
                                          f"{checkpoint_id[-8:]}.")
                query = "&".join(f"runs={r.id}" for r in [run, *forks])
                return redirect(f"{reverse('dashboard:runs_compare')}?{query}")
        else:
            status = 400
    elif fork_post:
        _need(request, FORK, "forking a run")
        if form.is_valid() and model_form.is_valid():
            edit = form.edit()
            try:
                child = services.run_fork(
                    run=run, checkpoint_id=checkpoint_id, user=request.user,
                    values=edit or None, as_node=form.cleaned_data.get("as_node") or "",
                    options=services.RunOptions(model_settings=model_form.settings()))
            except services.ModelSettingsError as exc:
                model_form.add_errors(exc.errors)
                status = 422
            except services.DebugInputError as exc:
                for name, text in exc.errors.items():
                    field = f"ch_{name}" if f"ch_{name}" in form.fields else (
                        name if name in form.fields else None)
                    form.add_error(field, text)
                status = 400
            else:
                messages.success(request, f"Forked from {run.graph} {str(run.id)[:8]} at "
                                          f"checkpoint {checkpoint_id[-8:]}.")
                return redirect("dashboard:run_detail", run_id=child.id)
        else:
            status = 400
    return TemplateResponse(request, "dashboard/run_fork.html", {
        "run": run, "event": event, "checkpoint": view, "form": form,
        "model_form": model_form, "ways_form": ways_form,
        "error_count": len(form.errors) + len(model_form.errors),
        "can_fork": request.user.has_perm(FORK),
    }, status=status)


def _way_errors(form: ForkWaysForm, rows: list[tuple[int, dict[str, Any]]],
                errors: dict[str, str]) -> None:
    """The service's ``ways.<n>.<field>`` errors on the form's rows."""
    for name, text in errors.items():
        parts = name.split(".")
        if len(parts) >= 3 and parts[1].isdigit() and int(parts[1]) < len(rows):
            field = f"way{rows[int(parts[1])][0]}_{parts[2]}"
            form.add_error(field if field in form.fields else None, text)
        else:
            form.add_error(None, text)


def runs_compare(request: HttpRequest) -> TemplateResponse:
    """Runs of a branch tree side by side (``?runs=…&runs=…``, or ``?tree=<run>``: its
    whole tree), their figures moving while they run (the table polls itself)."""
    tree = request.GET.get("tree", "")
    if tree:
        runs = [r for r in comparisons.run_tree(run=run_or_404(request, _uuid(tree)))
                if selectors.run_can_view(user=request.user, run=r)]
    else:
        ids = list(dict.fromkeys(request.GET.getlist("runs")))
        if not 2 <= len(ids) <= comparisons.TREE_LIMIT:
            return TemplateResponse(request, "dashboard/runs_compare.html", {
                "problem": f"{len(ids)} runs given; compare 2 to {comparisons.TREE_LIMIT} "
                           "(?runs=<id>&runs=<id>, or ?tree=<id> for a run's branches)"},
                status=400)
        runs = [run_or_404(request, _uuid(i)) for i in ids]
    columns = comparisons.runs_compare(runs=runs)
    partial = "dashboard/_compare_table.html" if getattr(request, "htmx", False) \
        else "dashboard/runs_compare.html"
    return TemplateResponse(request, partial, {
        "columns": columns, "live": any(c.active for c in columns),
        "refresh": request.get_full_path()})


def _uuid(text: str) -> UUID:
    """A run id from the query, or a 404 naming it."""
    try:
        return UUID(text)
    except ValueError:
        raise Http404(f"{text[:60]!r} is not a run id") from None


def _state_form(request: HttpRequest, run: Run, values: dict[str, Any],
                bound: bool | None = None) -> StateEditForm:
    """The state edit form (fork, edit and continue) of ``run``'s graph, on ``values``
    (bound to the POST, unless ``bound`` says otherwise); the graph judges the edit
    (``services.state_edit_errors``)."""
    schema = selectors.graph_debug_schema(graph=run.graph)
    post = request.method == "POST" if bound is None else bound
    return StateEditForm(request.POST if post else None,
                         channels=schema.channels, values=values, nodes=schema.nodes,
                         internal=schema.internal, fields=schema.fields(values),
                         check=lambda edit, as_node: services.state_edit_errors(
                             graph=run.graph, values=edit, as_node=as_node))


def run_state_edit(request: HttpRequest, run_id: UUID
                   ) -> TemplateResponse | HttpResponseRedirect:
    """Edit a paused run's state in place (LangGraph's ``update_state``), then, with
    ``continue``, run on from the edited state: Studio's "edit and continue"."""
    run = run_or_404(request, run_id)
    checkpoint_id = run.last_root_checkpoint()
    view = checkpoint_get(thread_id=run.thread_id, checkpoint_id=checkpoint_id) \
        if checkpoint_id and run.status == Run.Status.PAUSED else None
    if view is None:
        return TemplateResponse(request, "dashboard/run_state_edit.html", {
            "run": run, "not_paused": True}, status=409)
    form = _state_form(request, run, view.values)
    status = 200
    if request.method == "POST":
        _need(request, FORK, "editing a run's state")
        go_on = request.POST.get("continue") == "1"
        if go_on:
            _need(request, DEBUG, "continuing a run")
        if form.is_valid():
            edit, as_node = form.edit(), form.cleaned_data.get("as_node") or ""
            # decided on the checkpoint the page showed, as a run request's edit is
            seen = str(request.POST.get("checkpoint") or checkpoint_id)[:64]
            try:
                with thread_runs.page_edit(run, seen):
                    if edit or as_node:
                        services.run_update_state(run=run, values=edit or None,
                                                  as_node=as_node, user=request.user,
                                                  checkpoint_id=seen)
                    if go_on:
                        services.run_continue(run=run, user=request.user)
            except services.DebugInputError as exc:
                for name, text in exc.errors.items():
                    form.add_error(f"ch_{name}" if f"ch_{name}" in form.fields else None, text)
            except services.ServiceError as exc:
                messages.error(request, exc.message)
                return redirect("dashboard:run_detail", run_id=run.id)
            else:
                changed = ", ".join(edit) or "nothing"
                messages.success(request, f"State edited ({changed})"
                                 + ("; the run goes on." if go_on else
                                    "; the run stays paused until you continue it."))
                return redirect("dashboard:run_detail", run_id=run.id)
        status = 400
    return TemplateResponse(request, "dashboard/run_state_edit.html", {
        "run": run, "checkpoint": view, "form": form,
        "can_fork": request.user.has_perm(FORK), "can_debug": request.user.has_perm(DEBUG),
    }, status=status)


def run_compare(request: HttpRequest, run_id: UUID, other_id: UUID) -> TemplateResponse:
    """Two branches side by side: their states at the fork point and at the end."""
    run, other = run_or_404(request, run_id), run_or_404(request, other_id)
    child, parent = (other, run) if other.parent_id == run.id else (run, other)
    at_fork = None
    if child.parent_id == parent.id and child.forked_from_checkpoint:
        base = checkpoint_get(thread_id=parent.thread_id,
                              checkpoint_id=child.forked_from_checkpoint)
        first = (selectors.run_events(run_id=child.id)
                 .filter(kind=RunEvent.Kind.CHECKPOINT, namespace="").first())
        edited = checkpoint_get(thread_id=child.thread_id,
                                checkpoint_id=first.checkpoint_id) if first else None
        at_fork = values_diff(base.values if base else {}, edited.values if edited else {})
    related = child.parent_id == parent.id
    left, right = (parent, child) if related else (run, other)  # the same sides everywhere
    ends = [run_checkpoint(r) for r in (left, right)]
    at_end = values_diff(ends[0].values if ends[0] else {}, ends[1].values if ends[1] else {})
    at_end.sort(key=lambda c: not str(c["path"]).startswith("result"))  # the outcome first
    columns = comparisons.runs_compare(runs=[left, right])
    return TemplateResponse(request, "dashboard/run_compare.html", {
        "columns": columns, "live": any(c.active for c in columns),
        "refresh": f"{reverse('dashboard:runs_compare')}?runs={left.id}&runs={right.id}",
        "run": run, "other": other, "left": left, "right": right, "at_fork": at_fork,
        "at_end": at_end,
        "left_name": f"{'parent' if related else 'this run'} {str(left.id)[:8]}",
        "right_name": f"{'fork' if related else 'other run'} {str(right.id)[:8]}",
        "outcomes": [(r, results.run_result(run=r)) for r in (left, right)],
    })


def _back(request: HtmxHttpRequest, run: Run) -> HttpResponse:
    if request.htmx:
        return HttpResponse(status=204, headers={"HX-Refresh": "true"})
    return redirect("dashboard:run_detail", run_id=run.id)
