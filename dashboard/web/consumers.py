"""Websocket consumers: the runs list and one run's live trace."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from itertools import batched
from typing import Any
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import ValidationError
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from config.dberrors import database_unreachable
from dashboard import limits, policy, selectors, signals
from dashboard.models import Run
from dashboard.runs import doorbells
from dashboard.runs.figures import FiguresFold
from dashboard.runs.follow import Step, ended, follow, with_rollback
from dashboard.services import LimitReached
from dashboard.web.forms.inbox import PAGE_SIZE, InboxFilters
from dashboard.web.middleware import CLOSE_TRY_AGAIN_LATER
from dashboard.web.presentation import header, inbox, results, trace
from dashboard.web.presentation.timeline import ROWS_PER_PARTIAL

logger = logging.getLogger(__name__)

WATERFALL_TICK_SECONDS = 2.0
"""How long an active run's waterfall may stand still on its page before it is drawn to now."""

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class PlanwatchConsumer(AsyncWebsocketConsumer):
    """A signed-in user's websocket, whose messages do not each queue on the database thread.

    Channels (4.2+) runs ``close_old_connections`` through ``sync_to_async`` before every
    handler call: a hop to the one thread all database work shares. With 100 watchers of a
    run that is 100 hops queued for every frame (seen in py-spy as most of daphne's time
    under fan-out). Planwatch's consumers touch the database only through
    ``database_sync_to_async``, which closes stale connections itself around each call, so
    the hop buys nothing here.
    """

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Call the handler for ``message["type"]`` directly; one that fails because the
        database cannot be reached closes the socket "try again later"
        (:meth:`try_again_later`), so the page reconnects and catches up once it can."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        try:
            await handler(message)
        except Exception as exc:
            if message["type"] == "websocket.disconnect" or not database_unreachable(exc):
                raise
            logger.warning("%s: database unreachable under %s; closing the socket for the "
                           "page to reconnect", type(self).__name__, message["type"])
            await self.try_again_later()

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        """Accept the socket (and remember it was)."""
        self.accepted = True
        await super().accept(subprotocol, headers)

    async def try_again_later(self) -> None:
        """Close the socket with :data:`CLOSE_TRY_AGAIN_LATER`, accepted first if it was
        not yet (a handshake refused is an error in the page's console, and is not
        tried again)."""
        if not getattr(self, "accepted", False):
            await self.accept()
        await self.close(code=CLOSE_TRY_AGAIN_LATER)

    async def websocket_connect(self, message: dict[str, Any]) -> None:
        """Make sure the layer keeps listening (see :func:`_akeep_listening`), then connect;
        a signed-in user's socket then follows their session (see :meth:`session_revoke`)."""
        await _akeep_listening(self.channel_layer)
        self.session_groups = signals.session_groups(self.scope)
        for group in self.session_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await super().websocket_connect(message)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        """Leave the session's groups, then disconnect as Channels does."""
        for group in getattr(self, "session_groups", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
        await super().websocket_disconnect(message)

    async def session_revoke(self, message: dict[str, Any]) -> None:
        """The user signed out, was deactivated or changed password or rights: close (4401);
        the page's socket reconnects only with a session that is still valid."""
        await self.close(code=CLOSE_UNAUTHENTICATED)

    async def refuse_anonymous(self) -> bool:
        """Close the socket of a user who is not signed in; whether it was closed."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return True
        return False


_LISTENING: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


async def _akeep_listening(layer: Any) -> None:
    """Give the channel layer a subscription of its own that stays, once per event loop.

    channels-redis's pub/sub reader sleeps in 0.1 s steps while its connection has no
    subscription at all; a watcher that subscribes then (the first trace opened, or the
    next one after the last closed) had its first doorbells wait up to 100 ms (measured:
    80 ms on every short run). One subscription that is never given up keeps it reading.
    """
    loop = asyncio.get_running_loop()
    if loop not in _LISTENING:
        _LISTENING.add(loop)
        await layer.new_channel("planwatch.listening.")


class RunsConsumer(PlanwatchConsumer):
    """Streams status changes of the runs the user may read to the runs list."""

    async def connect(self) -> None:
        """Refuse anonymous users; join the runs group."""
        if await self.refuse_anonymous():
            return
        # ?since=<ISO time the page was rendered>: runs created later are added as new rows
        since = parse_qs(self.scope.get("query_string", b"").decode()).get("since", [""])[-1]
        try:
            self.since = parse_datetime(since) if since else None
        except ValueError:
            self.since = None
        if self.since is not None and self.since.tzinfo is None:
            self.since = None  # a time without a zone cannot be compared with stored times
        self.seen: set[str] = set()
        self.team = await _ais_team(self.scope["user"])
        self.readable: dict[str, bool] = {}  # run id → whether the user may read it
        await self.channel_layer.group_add(doorbells.RUNS_GROUP, self.channel_name)
        await self.accept()

    async def _may_read(self, run_id: str) -> bool:
        """Whether the user may read the run (:mod:`dashboard.policy`), asked once a run."""
        if self.team:
            return True
        if run_id not in self.readable:
            if len(self.readable) > 10_000:
                self.readable.clear()
            run = await _arun(run_id)
            self.readable[run_id] = run is not None and await _acan_view(
                self.scope["user"], run)
        return self.readable[run_id]

    async def disconnect(self, code: int) -> None:
        """Leave the runs group."""
        await self.channel_layer.group_discard(doorbells.RUNS_GROUP, self.channel_name)

    async def run_changed(self, message: dict[str, Any]) -> None:
        """Add a run created after the page as a new row; send its status cells (OOB swaps)."""
        if not await self._may_read(str(message["run"]["id"])):
            return
        await self._add_if_new(str(message["run"]["id"]))
        # its working time and waits moved with its status: read once (figures.py's fold)
        figures = await _arun_waits(str(message["run"]["id"]))
        html = render_to_string("dashboard/_run_status_oob.html",
                                {"run": {**message["run"], "figures": figures}})
        await self.send(text_data=html)

    async def runs_moved(self, message: dict[str, Any]) -> None:
        """Send the node cells of every run the user may read in a digest of moves, in one
        frame."""
        shown = [s for s in message["runs"] if await self._may_read(str(s["id"]))]
        for summary in shown:
            await self._add_if_new(str(summary["id"]))
        if shown:
            await self.send(text_data="".join(
                # only the node moved: the clocks tick on where they are
                render_to_string("dashboard/_run_status_oob.html", {"run": summary,
                                                                    "node_only": True})
                for summary in shown
            ))

    async def _add_if_new(self, run_id: str) -> None:
        """Add the row of a run created after the page, the first time it is heard of."""
        if self.since is None or run_id in self.seen:
            return
        self.seen.add(run_id)
        run = await _arun(run_id)
        if run is not None and run.created_at > self.since:
            await self.send(text_data=render_to_string("dashboard/_run_new_oob.html",
                                                       {"run": run}))
            # alone: a <tr> after a <tbody> would get a tbody of its own when parsed
            await self.send(text_data='<tr id="run-rows-empty" hx-swap-oob="delete"></tr>')


CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY = 4429  # past PLANWATCH_MAX_STREAMS_PER_USER or _PER_PROCESS (see limits)
REPLAY_CHUNK = 500  # events per message when catching a client up from the log
NOTICE_CLEARED = '<div id="trace-notice" aria-live="polite" hx-swap-oob="true"></div>'
"""The trace page's notice line, emptied (an OOB swap)."""

RENDERED_BATCHES = 512  # recently rendered batches and headers, shared by a run's watchers
_RENDERED: dict[tuple[Any, ...], Any] = {}


def _trim_rendered() -> None:
    """Forget the oldest renders past ``RENDERED_BATCHES`` (dicts keep insertion order)."""
    while len(_RENDERED) > RENDERED_BATCHES:
        _RENDERED.pop(next(iter(_RENDERED)))


@database_sync_to_async
def _arun(run_id: str) -> Run | None:
    """The run, or None if there is no such run."""
    try:
        return selectors.run_get(run_id=run_id)
    except (Run.DoesNotExist, ValidationError, ValueError):
        return None


@database_sync_to_async
def _arun_waits(run_id: str) -> Any:
    """A run's working time and waits for people (None before its first event)."""
    return selectors.runs_waits(run_ids=[run_id]).get(run_id)


@database_sync_to_async
def _aqueue_position(run_id: str) -> int | None:
    """The run's place in the line for a slot now (None once it left the line)."""
    run = Run.objects.with_queue_position().only("id").filter(id=run_id).first()
    return getattr(run, "queue_position", None)


@database_sync_to_async
def _afold(run: Run) -> tuple[trace.TraceFold, list[dict[str, Any]]]:
    """The run's whole log folded, and the events as dicts."""
    return trace.trace_fold(run=run)


@database_sync_to_async
def _aresult_html(run_id: str, tasks: dict[str, dict[str, Any]]) -> str:
    """The result card of a finished run as an OOB swap ("" while it is active)."""
    run = selectors.run_get(run_id=run_id)
    result = results.run_result(run=run, tasks=tasks)
    if result is None:
        return ""
    return render_to_string("dashboard/_result_card.html", {"result": result, "oob": True})


@database_sync_to_async
def _abudget_html(run_id: str) -> str:
    """The run's budgets and their use as an OOB swap ("" if it has none)."""
    run = selectors.run_get(run_id=run_id)
    budget = selectors.run_budget(run=run)
    if budget is None:
        return ""
    return render_to_string("dashboard/_trace_budget.html",
                            {"run": run, "budget": budget, "oob": True})


BUDGET_MARKS = ("budget_warning", "budget_reached", "budget_extended")
"""Events that change what the header's budgets show beside their use (budgets.MARKS)."""


@database_sync_to_async
def _ais_team(user: Any) -> bool:
    return policy.is_team(user)


@database_sync_to_async
def _acan_view(user: Any, run: Run) -> bool:
    return selectors.run_can_view(user=user, run=run)


@database_sync_to_async
def _aoutput(run_id: str) -> Any:
    """A finished run's output (None if it was deleted)."""
    return Run.objects.filter(id=run_id).values_list("output", flat=True).first()


@database_sync_to_async
def _acan(user: Any, perm: str) -> bool:
    return bool(user.has_perm(perm))


class RunConsumer(PlanwatchConsumer):
    """Streams one run's trace as OOB partials: the log after ``?after=<seq>``, then live."""

    async def connect(self) -> None:
        """Check the user, the run and ``after``; catch the client up, then follow the run."""
        if await self.refuse_anonymous():
            return
        user = self.scope["user"]
        after = parse_qs(self.scope.get("query_string", b"").decode()).get("after", ["0"])[-1]
        run = await _arun(str(self.scope["url_route"]["kwargs"]["run_id"]))
        if not after.isdigit() or run is None:
            await self.close(code=CLOSE_BAD_REQUEST if run else CLOSE_NOT_FOUND)
            return
        if not await _acan_view(user, run):
            # another's run is an unknown one (dashboard.policy's 404); an inactive user
            # is refused as such
            await self.close(code=CLOSE_NOT_FOUND if user.is_active else CLOSE_FORBIDDEN)
            return
        try:
            self.slot = limits.stream_slot_take(user=user)
        except LimitReached as exc:  # the reason names the limit (a close frame holds 123 B)
            await self.close(code=CLOSE_TOO_MANY, reason=json.dumps(
                {"limit": exc.limit, "detail": "close another stream first"}))
            return
        self.run, self.sent, self.status = run, int(after), run.status
        # the waterfall the page shows: unknown (the page's own) until this socket sends one
        self.wf_drawn: Any = None
        self.wf_base: Any = None
        self.shown_status = ""  # the status the page's buttons were drawn for: unknown yet
        self.run_key = str(run.id)
        self.can_cancel = await _acan(user, "dashboard.cancel_run")
        await self.accept()
        self.run = await _arun(str(run.id)) or run
        self.status = self.run.status
        self.fold, rows = await _afold(self.run)
        self.unfolded: list[dict[str, Any]] = []  # sent from the shared renders, not folded yet
        missed = [e for e in rows if e["seq"] > self.sent]
        everything = trace.Changes(graph=True, new_tasks=True, decisions=True, waterfall=True)
        for start in range(0, len(missed), REPLAY_CHUNK):
            await self._send_batch(missed[start:start + REPLAY_CHUNK], everything)
        # Always: the page read the run before its events, so a page that shows every event
        # (nothing missed) may still carry an older header ("Running · node —" under a graph
        # already at ask_user); the doorbells that moved it rang before this socket joined.
        await self._send_header()
        # the page was rendered before these: its questions are stale. A run waiting for
        # an answer reloads them in any case: its questions are written with its status
        # after its events (a final write may add no event), so a page drawn between the two
        # shows none, and no later event or status change would bring them
        if missed or self.run.status == Run.Status.INTERRUPTED:
            await self._send_interrupts()
        if missed:
            await self._send_result()
        if getattr(self.run, "queue_position", None) is not None:
            # its place in the line moves as runs ahead of it start or go: the runs list's
            # doorbell says so (left again once this run starts)
            await self.channel_layer.group_add(doorbells.RUNS_GROUP, self.channel_name)
            self.in_line = True
        if not self.run.is_finished:
            # follow() reads the log after what was sent before it waits on the doorbell:
            # whatever was committed since the fold above arrives with its first step
            self.follower = asyncio.get_running_loop().create_task(self._afollow())
            self.ticker = asyncio.get_running_loop().create_task(self._atick_waterfall())

    async def disconnect(self, code: int) -> None:
        """Stop following the run (which leaves its group); give the stream's slot back."""
        await self._leave_line()
        if getattr(self, "slot", None) is not None:
            self.slot.close()
        for name in ("follower", "ticker"):
            task = getattr(self, name, None)
            if task is not None:
                task.cancel()
                await asyncio.wait({task})

    async def _atick_waterfall(self) -> None:
        """While the run is active, draw its waterfall to now whenever no batch drew it for
        :data:`WATERFALL_TICK_SECONDS`: an open bar (a wait for an answer, a long call) and
        the axis grow with the run between its events."""
        while not self.run.is_finished:
            await asyncio.sleep(WATERFALL_TICK_SECONDS)
            idle = time.monotonic() - getattr(self, "wf_sent_at", 0.0)
            if self.run.is_finished or self.run.started_at is None \
                    or idle < WATERFALL_TICK_SECONDS:
                continue
            await self.send(text_data=self._waterfall_now())

    def _waterfall_now(self) -> str:
        """The waterfall drawn to now, as what changed since the page's (whole, when its
        axis broke anew); this page's drawing is its own from then on."""
        if self.unfolded:
            self.fold.apply(self.unfolded)
            self.unfolded = []
        view = trace.run_waterfall(self.run, self.fold)
        delta = view.delta(self.wf_drawn)
        self.wf_drawn, self.wf_base = view.drawn, ("tick", id(self), time.monotonic())
        self.wf_sent_at = time.monotonic()
        if delta is None:
            return render_to_string("dashboard/_waterfall.html", {"waterfall": view, "oob": True})
        return render_to_string("dashboard/_waterfall_delta.html",
                                {"waterfall": view, "waterfall_delta": delta})

    async def _afollow(self) -> None:
        """Send each step of the run's log until it finishes (see :func:`follow`), or until
        a rollback took the log back before what the page shows."""
        # the header names the creator; a cancelled run to be rolled back is followed on
        runs = with_rollback(Run.objects.select_related("created_by"))
        try:
            async for step in follow(self.run.id, self.sent, until=ended, runs=runs):
                if step.run is not None and step.run.last_seq < self.sent:
                    await self._send_rolled_back(step.run)
                    return
                await self._send_step(step)
        except Exception as exc:
            if not database_unreachable(exc):
                raise
            # the database went away under the follow: a page left open on a socket that
            # says nothing would show nothing; closed "try again later", it reconnects
            # (saying so meanwhile) and catches up from its last event once it can
            logger.warning("run %s: database unreachable while following; closing the "
                           "socket for the page to reconnect", self.run_key)
            await self.try_again_later()

    async def _send_rolled_back(self, run: Run) -> None:
        """The run's last LangGraph run was rolled back (LangGraph's cancel with
        ``action=rollback``) after the page drew its events: the header and the questions
        as the run stands again, and a notice to reload for its trace (which ends where it
        waited before)."""
        await self._show_run(run)
        await self.send(text_data=render_to_string("dashboard/_trace_rolled_back.html", {
            "run": run, "undone": run.last_seq + 1}))

    async def _send_step(self, step: Step) -> None:
        """Send a step's rows, then what moved of the run: a doorbell's summary, or the run
        as read from the log."""
        summary = step.summary
        if summary is not None and summary["status"] == self.status:
            # only the node moved (every step): the doorbell carries it, no query needed
            if summary["last_seq"] >= self.run.last_seq:
                self.run.current_node = summary["current_node"]
                self.run.last_seq = summary["last_seq"]
                _take_rollups(self.run, summary)  # the header's calls, tokens and cost
            await self._send_events(step.events, header=True)
            return
        if summary is not None and summary["id"] == self.run_key \
                and summary["last_seq"] >= self.run.last_seq:
            # the new status first: the page says the run ended (or waits) before it takes
            # in the step's rows, which may be many
            run = self._take_summary(summary)
            if run.status == Run.Status.SUCCEEDED and run.output is None:
                run.output = await _aoutput(str(run.id))  # its outcome, from the start
            await self._send_header()
        await self._send_events(step.events)
        if summary is not None:
            await self.run_changed({"type": "run.changed", "run": summary})
        elif step.run is not None and (step.run.status != self.status
                                       or step.run.last_seq > self.run.last_seq):
            await self._show_run(step.run)

    async def _send_events(self, events: list[dict[str, Any]], *, header: bool = False) -> None:
        if not events:
            if header:
                await self._send_header()
            return  # duplicates of rows the client has
        # Every watcher of a run folds the same gapless log, so a batch renders the same
        # HTML for all of them: the first watcher in this process folds and renders it, the
        # others send it and fold later, only if they ever have to render themselves.
        # The waterfall is sent as what changed since the page's last one (a 215-task plan
        # has 645 bars): watchers whose pages got the same batches share the same change.
        key = ("batch", self.run_key, events[0]["seq"], events[-1]["seq"], self.can_cancel,
               self.wf_base)
        cached = _RENDERED.get(key)
        if cached is None:
            changes = self.fold.apply([*self.unfolded, *events])
            self.unfolded = []
            html, drawn = self._render_batch(events, changes)
            cached = _RENDERED[key] = (html, changes.interrupts, drawn)
            _trim_rendered()
        else:
            self.unfolded.extend(events)
        self.wf_drawn, self.wf_base = cached[2], key
        if cached[2] is not None:
            self.wf_sent_at = time.monotonic()
        self.sent = max(self.sent, events[-1]["seq"])
        await self.send(text_data=cached[0] + (self._header_html() if header else ""))
        if self.run.budget and any(e["kind"] in BUDGET_MARKS for e in events):
            await self.send(text_data=await _abudget_html(self.run_key))  # warned, reached
        if cached[1]:
            await self._send_interrupts()

    async def run_changed(self, message: dict[str, Any]) -> None:
        """Redraw the header from what a doorbell says of the run's new status (another
        run's, heard while this one waits in line: its place may have moved)."""
        summary = message["run"]
        if summary["id"] != self.run_key:
            await self._line_moved()
            return
        if summary["last_seq"] < self.run.last_seq:
            return  # older than what the header shows already (a late doorbell)
        await self._show_run(self._take_summary(summary))

    def _take_summary(self, summary: dict[str, Any]) -> Run:
        """The run as a doorbell's summary says it stands now."""
        run = self.run
        run.status, run.current_node = summary["status"], summary["current_node"]
        run.last_seq, run.error_message = summary["last_seq"], summary["error_message"]
        run.outcome = summary.get("outcome")
        run.outcome_reason = summary.get("outcome_reason") or ""
        run.started_at = parse_datetime(summary["started_at"] or "")
        run.finished_at = parse_datetime(summary["finished_at"] or "")
        _take_rollups(run, summary)
        return run

    async def runs_moved(self, message: dict[str, Any]) -> None:
        """Other runs moved to their next node (heard while waiting in line): the line is
        the same."""

    async def _line_moved(self) -> None:
        """A run started, ended or went: redraw this queued run's place in the line."""
        if not getattr(self, "in_line", False) or self.run.status != Run.Status.QUEUED:
            return
        position = await _aqueue_position(self.run_key)
        if position != getattr(self.run, "queue_position", None):
            self.run.queue_position = position  # type: ignore[attr-defined]
            await self._send_header()

    async def _leave_line(self) -> None:
        if getattr(self, "in_line", False):
            self.in_line = False
            await self.channel_layer.group_discard(doorbells.RUNS_GROUP, self.channel_name)

    async def _show_run(self, run: Run) -> None:
        """Re-render the header; reload the questions (and the result) when the status moved."""
        # a run read from the log has no place in the line: it keeps the one shown
        place = getattr(self.run, "queue_position", None)
        run.queue_position = place if run.status == Run.Status.QUEUED else None  # type: ignore[attr-defined]
        if run.status != Run.Status.QUEUED:
            await self._leave_line()
        if run.status == Run.Status.SUCCEEDED and run.output is None:
            # a doorbell carries no output: the header reads it once, for the outcome its
            # graph declares (a plan that failed shows so the moment the run ends)
            run.output = await _aoutput(str(run.id))
        self.run = run
        await self._send_header()
        if run.status != self.status:
            self.status = run.status
            await self._send_interrupts()
            if run.is_finished:
                await self._send_result()
                # "Cancel requested; the run stops at its next node." and the like said what
                # was about to happen: the run has stopped, its card says how
                await self.send(text_data=NOTICE_CLEARED)

    async def _send_batch(self, events: list[dict[str, Any]], changes: trace.Changes) -> None:
        self.sent = max(self.sent, events[-1]["seq"])
        html, self.wf_drawn = self._render_batch(events, changes)
        self.wf_base = ("own", id(self), events[-1]["seq"])  # this page's alone
        await self.send(text_data=html)

    def _render_batch(self, events: list[dict[str, Any]], changes: trace.Changes
                      ) -> tuple[str, Any]:
        """The batch's partials, and the waterfall as the page then shows it."""
        context = self._context(events=events, changes=changes, last_seq=events[-1]["seq"])
        drawn = self.wf_drawn
        if changes.waterfall:
            view = context["waterfall"]()
            context["waterfall"] = view
            context["waterfall_delta"] = view.delta(self.wf_drawn)
            drawn = view.drawn
        # rows begun in this batch are appended; rows begun before are completed in place
        context["touched"] = self.fold.timeline.touched(events[0]["seq"], events[-1]["seq"])
        new_rows = [t for t in context["touched"] if t[2]]
        # appended in partials of ROWS_PER_PARTIAL: the page swaps them a slice of its main
        # thread at a time (static/planwatch/app.js), never a whole step's rows in one go
        context["new_row_parts"] = list(batched(new_rows, ROWS_PER_PARTIAL))
        # plans that got tasks are drawn alone: a new one added, a grown one drawn again
        plans = [g for g in trace.task_groups(self.fold) if g.parent in changes.plans] \
            if changes.plans and not changes.new_tasks else []
        context["dag_plans"] = [  # (the plan, whether the page has it already)
            (g, any(t["id"] not in changes.added for c in g.columns for t in c))
            for g in plans]
        in_plans = {t["id"] for g in plans for c in g.columns for t in c}
        context["changed_tasks"] = [
            trace.task_card(self.fold, tid) for tid in sorted(changes.tasks - in_plans)
            # the root is the goal, drawn as no card of the DAG: nothing to swap
            if tid in self.fold.tasks and self.fold.tasks[tid].get("parent") is not None
        ]
        return render_to_string("dashboard/_trace_batch.html", context), drawn

    async def _send_header(self) -> None:
        html = self._header_html()
        if self.run.budget and getattr(self, "budget_status", None) != self.run.status:
            # a run with budgets: their use redrawn as its status moves (one read)
            self.budget_status = self.run.status
            html += await _abudget_html(self.run_key)
        await self.send(text_data=html)

    def _header_html(self) -> str:
        # sent on every step to every watcher: rendered from the run alone, once per process.
        # Only the live facts: the buttons beside them are sent when the status moves, so a
        # hand on "Cancel run" does not lose it to a redraw every step.
        run, head = self.run, header.run_head(self.run, figures=self._figures().at(timezone.now()))
        actions = run.status != self.shown_status
        self.shown_status = run.status
        key = ("header", self.run_key, head, self.can_cancel, actions)
        html = _RENDERED.get(key)
        if html is None:
            context = {"run": run, "head": head, "can_cancel": self.can_cancel, "oob": True}
            html = render_to_string("dashboard/_trace_live.html", context)
            if actions:
                html += render_to_string("dashboard/_trace_actions.html", context)
            _RENDERED[key] = html
            _trim_rendered()
        return html

    def _figures(self) -> FiguresFold:
        """The run's figures, folded again only when its status moved (a wait begins or
        ends only then), not on every step: a watcher may hold rows unfolded."""
        if getattr(self, "waits_status", None) != self.run.status:
            if self.unfolded:
                self.fold.apply(self.unfolded)
                self.unfolded = []
            self.waits_status = self.run.status
        return self.fold.waterfall.figures

    async def _send_result(self) -> None:
        """Send the result card of a run that has just finished (its output is read once)."""
        key = ("result", self.run_key, self.run.status)
        html = _RENDERED.get(key)
        if html is None:
            html = _RENDERED[key] = await _aresult_html(self.run_key, self.fold.tasks)
            _trim_rendered()
        if html:
            await self.send(text_data=html)

    async def _send_interrupts(self) -> None:
        # the slot only names the run (the browser loads the questions): once per process
        key = ("interrupts", self.run_key)
        html = _RENDERED.get(key)
        if html is None:
            html = _RENDERED[key] = render_to_string("dashboard/_run_interrupts_slot.html",
                                                     {"run": self.run, "oob": True})
            _trim_rendered()
        if html.strip():
            await self.send(text_data=html)

    def _context(self, **extra: Any) -> dict[str, Any]:
        context = trace.panels_context(run=self.run, fold=self.fold)
        context.update(can_cancel=self.can_cancel, **extra)
        return context


@database_sync_to_async
def _ainbox_update(user: Any, view: dict[str, Any], known: inbox.PendingState | None
                   ) -> tuple[str, inbox.PendingState]:
    return inbox.inbox_update(user=user, known=known, **view)


@database_sync_to_async
def _abadge(user: Any) -> str:
    return inbox.badge(count=selectors.interrupts_pending_count(user=user))


@database_sync_to_async
def _anotices(user: Any, after: int) -> tuple[str, int]:
    return inbox.browser_notices(user=user, after=after)


@database_sync_to_async
def _anewest_question() -> int:
    return selectors.interrupts_newest_pk()


def _inbox_view(query: dict[str, list[str]]) -> dict[str, Any]:
    """What an inbox page lists, from its socket's query string (the page's own filters;
    a compact page's questions and the time it was rendered)."""
    form = InboxFilters({k: v[0] for k, v in query.items() if k in InboxFilters.base_fields})
    form.is_valid()
    one = {k: v[0] for k, v in query.items()}
    shown = frozenset(int(p) for p in one.get("shown", "").split(",")[:PAGE_SIZE]
                      if p.isascii() and p.isdigit() and len(p) < 19)
    try:
        since = parse_datetime(one.get("since", "")[:40])
    except ValueError:
        since = None
    return {"filters": form.filters(), "compact": one.get("compact") == "1",
            "shown": shown, "since": since}


class InboxConsumer(PlanwatchConsumer):
    """Keeps the inbox page (or, with ``?badge``, the navigation count) current."""

    async def connect(self) -> None:
        """Refuse anonymous users; join the inbox group and bring the page up to date."""
        if await self.refuse_anonymous():
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.badge_only = "badge" in query
        self.view = _inbox_view(query)
        self.known: inbox.PendingState | None = None
        # the questions asked from now on are told in the browser (notify.js)
        self.seen = await _anewest_question() if self.badge_only else 0
        await self.channel_layer.group_add(doorbells.INBOX_GROUP, self.channel_name)
        await self.accept()
        await self.inbox_changed({})

    async def disconnect(self, code: int) -> None:
        """Leave the inbox group."""
        await self.channel_layer.group_discard(doorbells.INBOX_GROUP, self.channel_name)

    async def inbox_changed(self, message: dict[str, Any]) -> None:
        """Send the badge, or the inbox rows and the runs whose questions changed."""
        if self.badge_only:
            notices, self.seen = await _anotices(self.scope["user"], self.seen)
            await self.send(text_data=await _abadge(self.scope["user"]) + notices)
            return
        html, self.known = await _ainbox_update(self.scope["user"], self.view, self.known)
        await self.send(text_data=html)


def _take_rollups(run: Run, summary: dict[str, Any]) -> None:
    """Copy a doorbell's model-call rollups (calls, tokens, cost) onto the header's run."""
    for name in header.ROLLUPS:
        if name in summary:
            setattr(run, name, summary[name])
