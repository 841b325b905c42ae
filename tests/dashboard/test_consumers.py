"""The run consumer: refuses strangers, replays the log after ``after``, then streams live."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from dashboard import services
from dashboard.runs import doorbells as broadcast
from dashboard.runs.record import event_dict
from dashboard.web.consumers import (
    CLOSE_BAD_REQUEST,
    CLOSE_FORBIDDEN,
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
)
from dashboard.web.routing import websocket_urlpatterns
from tests.conftest import wait_run

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

APP = URLRouter(websocket_urlpatterns)


def seqs(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'id="ev-(\d+)" data-seq="\1"', html)]


async def runs_list_hears(user, since: str, *messages: dict) -> list[str]:
    """What a runs-list socket opened at ``since`` sends once ``messages`` reach its group."""
    comm, ok, _ = await connect(user, f"/ws/runs/?since={since.replace('+', '%2B')}")
    assert ok
    for message in messages:
        await get_channel_layer().group_send(broadcast.RUNS_GROUP, message)
    sent = []
    while not await comm.receive_nothing(timeout=0.3):
        sent.append(await comm.receive_from(timeout=5))
    await comm.disconnect()
    return sent


async def connect(user, path: str) -> tuple[WebsocketCommunicator, bool, int | None]:
    comm = WebsocketCommunicator(APP, path)
    comm.scope["user"] = user
    ok, code = await comm.connect(timeout=5)
    return comm, ok, code


async def collect(comm: WebsocketCommunicator, until_seq: int) -> list[int]:
    """Rows received until the row ``until_seq`` arrived (guarded by a timeout)."""
    got: list[int] = []
    while until_seq not in got:
        got.extend(seqs(await comm.receive_from(timeout=20)))
    return got


def test_anonymous_connections_are_refused(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 1}, user=operator)

    async def scenario():
        _, ok, code = await connect(AnonymousUser(), f"/ws/runs/{run.id}/")
        assert not ok and code == CLOSE_UNAUTHENTICATED

    async_to_sync(scenario)()


def test_inactive_users_unknown_runs_and_bad_positions_are_refused(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 1}, user=operator)
    operator.is_active = False

    async def scenario():
        _, ok, code = await connect(operator, f"/ws/runs/{run.id}/")
        assert not ok and code == CLOSE_FORBIDDEN
        operator.is_active = True
        _, ok, code = await connect(operator, "/ws/runs/00000000-0000-0000-0000-000000000000/")
        assert not ok and code == CLOSE_NOT_FOUND
        _, ok, code = await connect(operator, f"/ws/runs/{run.id}/?after=-3")
        assert not ok and code == CLOSE_BAD_REQUEST

    async_to_sync(scenario)()


def test_a_reconnect_gets_exactly_the_rows_after_its_position(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
    run = wait_run(run.id)

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=4")
        assert ok
        html = await comm.receive_from(timeout=5)
        assert seqs(html) == list(range(5, run.last_seq + 1))
        assert f'data-last-seq="{run.last_seq}" hx-swap-oob="true"' in html
        assert 'id="trace-graph-state"' in html and "&quot;step&quot;: 3" in html
        header = await comm.receive_from(timeout=5)  # the page's header predates the rows
        assert 'id="trace-live"' in header and "status-succeeded" in header
        assert 'id="run-interrupts-bell"' in await comm.receive_from(timeout=5)
        result = await comm.receive_from(timeout=5)  # and the result card it now has
        assert 'id="trace-result"' in result and "status-succeeded" in result
        assert await comm.receive_nothing(timeout=0.2)
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_page_that_shows_every_event_still_gets_the_current_header(executor, operator):
    # The page reads the run, then its events: a run that moved in between (here: to its
    # question) is drawn with every event but an older header ("Running · node —"), and
    # the doorbells that moved it rang before the page's socket joined. Nothing will ring
    # again until someone answers, so the socket must send the header when it connects.
    run = services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                              user=operator)
    run = wait_run(run.id, statuses=("interrupted",))

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after={run.last_seq}")
        assert ok
        header = await comm.receive_from(timeout=3)
        await comm.disconnect()
        return header

    header = async_to_sync(scenario)()
    assert 'id="trace-live"' in header and 'hx-swap-oob="true"' in header
    assert ">Waiting for you<" in header
    # waiting for an answer, the wait ticks, apart from the working time, which stands
    assert re.search(r'id="trace-waiting" class="nowrap" data-started="[^"]+">', header)
    assert re.search(r'id="trace-working" class="nowrap">[0-9.]+ (m?s)<', header)
    assert f'id="trace-current" class="mono">{run.current_node}<' in header


def test_a_live_run_streams_every_row_once(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 8, "delay": 0.02},
                              user=operator)
    got: list[int] = []

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=0")
        assert ok
        html = ""
        while "kind-run_succeeded" not in html:
            html = await comm.receive_from(timeout=5)
            got.extend(seqs(html))
        await comm.disconnect()

    async_to_sync(scenario)()
    assert got == list(range(1, wait_run(run.id).last_seq + 1))


def test_duplicate_doorbells_are_dropped_and_gaps_filled_from_the_log(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 3}, user=operator)
    run = wait_run(run.id)

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=2")
        assert ok
        assert seqs(await comm.receive_from(timeout=5))[0] == 3
        await comm.receive_from(timeout=5)  # the header
        await comm.receive_from(timeout=5)  # the interrupts panel
        await comm.receive_from(timeout=5)  # the result card
        events = await database_sync_to_async(lambda: [event_dict(e) for e in run.events.all()])()
        layer = get_channel_layer()
        await layer.group_send(broadcast.run_group(run.id),
                               broadcast.events_message(run.id, events[:5]))
        assert await comm.receive_nothing(timeout=0.3)  # everything there was sent already
        await comm.disconnect()


        # a doorbell that skips rows the client lacks: the consumer reads them from the log
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=1")
        assert ok and seqs(await comm.receive_from(timeout=5))[0] == 2
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_status_change_reloads_the_header_and_interrupts_panel(executor, operator):
    run = services.run_create(graph="test.echo", input={"steps": 4, "ask": True},
                              user=operator)

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=0")
        assert ok
        seen = ""
        while 'id="run-interrupts-bell"' not in seen or "Waiting for you" not in seen:
            seen += await comm.receive_from(timeout=5)
        assert 'id="trace-live" class="trace-live" hx-swap-oob="true"' in seen
        assert f'hx-get="/runs/{run.id}/interrupts/"' in seen
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_status_doorbell_redraws_the_header_from_what_it_carries(transactional_db, operator):
    from django.utils import timezone

    from dashboard.models import Run

    started = timezone.now()
    run = Run.objects.create(graph="test.echo", thread_id="told:planner", created_by=operator,
                             state=Run.State.RUNNING, started_at=started)

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=0")
        assert ok and ">Running<" in await comm.receive_from(timeout=5)  # the header now
        assert await comm.receive_nothing(timeout=0.2)
        # the row still says running: what the header shows can only come from the doorbell
        summary = broadcast.run_summary({
            "id": run.id, "graph": run.graph, "status": "failed", "current_node": "step",
            "last_seq": 0, "started_at": started, "error_message": "ValueError: told",
            "finished_at": started + timezone.timedelta(seconds=2.5)})
        await get_channel_layer().group_send(broadcast.run_group(run.id),
                                             {"type": "run.changed", "run": summary})
        seen = ""
        while 'id="run-interrupts-bell"' not in seen:
            seen += await comm.receive_from(timeout=5)
        while not await comm.receive_nothing(timeout=0.5):  # the result and the notice follow
            seen += await comm.receive_from(timeout=5)
        await comm.disconnect()
        return seen

    seen = async_to_sync(scenario)()
    assert 'class="badge status-failed" role="status">Failed<' in seen
    assert "ValueError: told" in seen and ">2.5 s<" in seen
    # a notice of the page ("Cancel requested; …") is stale once the run stopped
    assert '<div id="trace-notice" aria-live="polite" hx-swap-oob="true"></div>' in seen
    assert 'id="trace-replay-link"' in seen  # a finished run can be replayed


def test_the_runs_list_gets_runs_created_after_it_as_new_rows(transactional_db, operator):
    from django.utils import timezone

    from dashboard.models import Run

    def make(name: str) -> Run:
        return Run.objects.create(graph="test.echo", thread_id=f"{name}:planner",
                                  created_by=operator)

    old = make("old")
    since = timezone.now().isoformat()
    new = make("new")

    messages = async_to_sync(runs_list_hears)(operator, since, *(
        {"type": "run.changed", "run": {"id": str(run.id), "graph": run.graph,
                                        "status": "running", "current_node": "step",
                                        "last_seq": 1}}
        for run in (old, new, new)
    ))
    added = [m for m in messages if 'hx-swap-oob="afterbegin"' in m]
    assert len(added) == 1 and f'<tr id="run-{new.id}">' in added[0]
    assert f"/runs/{new.id}/" in added[0] and "olga" in added[0]
    assert sum(f'id="run-{old.id}-status"' in m for m in messages) == 1
    assert sum(f'id="run-{new.id}-status" hx-swap-oob' in m for m in messages) == 2


def test_a_digest_of_node_moves_updates_every_runs_row_in_one_frame(transactional_db, operator):
    from django.utils import timezone

    from dashboard.models import Run

    since = timezone.now().isoformat()
    runs = [Run.objects.create(graph="test.echo", thread_id=f"d{i}:planner", created_by=operator)
            for i in range(3)]

    digest = [{"id": str(run.id), "graph": run.graph, "status": "running",
               "current_node": f"node{i}", "last_seq": 3} for i, run in enumerate(runs)]
    messages = async_to_sync(runs_list_hears)(operator, since,
                                               {"type": "runs.moved", "runs": digest})
    # one frame for the whole digest (a run's own creation notice may arrive too, through a
    # channel layer that delivers it after the socket joined: it names no digest node)
    cells = [m for m in messages if any(f">node{i}</td>" in m for i in range(3))]
    assert len(cells) == 1
    for i, run in enumerate(runs):
        assert f'<td id="run-{run.id}-node" class="mono col-node" hx-swap-oob="true">node{i}</td>' \
            in cells[0]
    # runs created after the page arrive as new rows, once each
    assert sum('hx-swap-oob="afterbegin"' in m for m in messages) == 3


def test_rows_whose_doorbell_never_rang_arrive_from_the_log(transactional_db, operator):
    from dashboard.models import Run, RunEvent

    run = Run.objects.create(graph="test.echo", thread_id="quiet:planner",
                             state=Run.State.RUNNING, created_by=operator)

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=0")
        assert ok and 'id="trace-live"' in await comm.receive_from(timeout=5)
        assert await comm.receive_nothing(timeout=0.2)

        @database_sync_to_async
        def write_silently() -> None:  # committed rows, no broadcast at all
            RunEvent.objects.bulk_create([
                RunEvent(run=run, seq=1, kind=RunEvent.Kind.RUN_STARTED),
                RunEvent(run=run, seq=2, kind=RunEvent.Kind.NODE_STARTED, node="step", step=1),
            ])
            Run.objects.filter(id=run.id).update(last_seq=2)

        await write_silently()
        got = seqs(await comm.receive_from(timeout=5))
        await comm.disconnect()
        return got

    assert async_to_sync(scenario)() == [1, 2]


def test_the_redis_layer_keeps_listening_after_the_last_watcher_leaves(transactional_db,
                                                                       operator):
    # channels-redis's reader sleeps in 0.1 s steps while its connection subscribes to
    # nothing: the next watcher's first doorbells would wait. One subscription stays.
    import redis
    from django.conf import settings

    from dashboard.models import Run

    if "redis" not in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
        pytest.skip("the Redis layer's reader: this runs in make test's Redis pass")
    run = Run.objects.create(graph="test.echo", thread_id="alone:planner", created_by=operator)
    server = redis.Redis.from_url(settings.REDIS_URL)

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=0")
        assert ok
        await comm.disconnect()
        return {c.decode() for c in server.pubsub_channels()}

    channels = async_to_sync(scenario)()
    assert not any(broadcast.run_group(run.id) in c for c in channels)  # the watcher left
    assert any(c.startswith("asgiplanwatch.listening.") for c in channels)


def test_a_node_run_begun_before_the_page_is_completed_in_place_and_new_ones_appended(
        executor, operator):
    from dashboard.models import Interrupt, RunEvent

    run = wait_run(services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                                       user=operator).id)
    asked = run.events.get(kind=RunEvent.Kind.INTERRUPT_RAISED)
    row = f"grp-t-{asked.task_id}"
    frames: list[str] = []

    async def scenario():
        # the page drew the ask node's start (a running row); the question came after it
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after={asked.seq - 1}")
        assert ok
        frames.append(await comm.receive_from(timeout=5))
        await database_sync_to_async(services.interrupt_answer)(
            interrupt=await Interrupt.objects.aget(run=run), answer="hello", user=operator)
        while "kind-run_succeeded" not in frames[-1]:
            frames.append(await comm.receive_from(timeout=20))
        await comm.disconnect()

    async_to_sync(scenario)()
    caught_up = frames[0]
    assert f'id="{row}-sum" data-kinds="node_started interrupt_raised" hx-swap-oob="true"' \
        in caught_up and "waiting for you" in caught_up
    assert f'<div id="{row}-events" hx-swap-oob="beforeend">' in caught_up
    assert f'id="{row}"' not in caught_up.replace(f'id="{row}-', "")  # never drawn twice
    live = "".join(frames[1:])
    summaries = re.findall(rf'<summary class="grp-sum grp-(\w+)" id="{row}-sum"', live)
    assert summaries and summaries[-1] == "finished"
    assert 'answered &quot;hello&quot; by olga' in live
    # the steps after it are new rows, appended to the timeline
    appended = live[live.index('<div id="trace-timeline" hx-swap-oob="beforeend">'):]
    assert '<details class="grp kind-node" id="grp-t-' in appended
    got = [s for f in frames for s in seqs(f)]  # each row's events go to that row, so a
    # frame's rows are in row order, not seq order: every event once is what counts
    assert sorted(got) == list(range(asked.seq, wait_run(run.id).last_seq + 1))


def test_a_queued_run_hears_its_place_in_the_line_move(transactional_db, operator):
    """A run waiting for a slot shows its place in the line, and the place moves live as the
    runs ahead of it start (the runs list's doorbell), not only when the page is reloaded;
    once it starts, other runs' news no longer reaches it."""
    from django.utils import timezone

    from dashboard.models import Run
    from dashboard.runs import store

    first, second, third = (
        Run.objects.create(graph="test.echo", thread_id=f"line-{n}:planner", created_by=operator)
        for n in range(3))

    def started(run: Run) -> dict:
        store.apply(run.id, store.claim(store.states.START, current="queued", owner="elsewhere",
                                        now=timezone.now()))
        return {"type": "run.changed", "run": broadcast.run_summary(
            Run.objects.values(*broadcast.SUMMARY_FIELDS).get(id=run.id))}

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{third.id}/?after=0")
        assert ok and "3rd in line" in await comm.receive_from(timeout=5)
        layer = get_channel_layer()
        await layer.group_send(broadcast.RUNS_GROUP, await database_sync_to_async(started)(first))
        assert "2nd in line" in await comm.receive_from(timeout=5)
        # node moves of other runs leave the line as it is: nothing is sent
        await layer.group_send(broadcast.RUNS_GROUP, {"type": "runs.moved", "runs": []})
        assert await comm.receive_nothing(timeout=0.3)
        await layer.group_send(broadcast.RUNS_GROUP, await database_sync_to_async(started)(second))
        assert "1st in line" in await comm.receive_from(timeout=5)
        # its own start: the header says so, and the line is left
        await layer.group_send(broadcast.run_group(third.id),
                               await database_sync_to_async(started)(third))
        seen = await comm.receive_from(timeout=5)
        while not await comm.receive_nothing(timeout=0.3):  # the questions panel follows
            seen += await comm.receive_from(timeout=5)
        assert ">Running<" in seen and "in line" not in seen
        await layer.group_send(broadcast.RUNS_GROUP, {"type": "run.changed", "run": {
            "id": str(first.id), "status": "succeeded"}})
        assert await comm.receive_nothing(timeout=0.3)
        await comm.disconnect()

    async_to_sync(scenario)()


def test_the_runs_lists_duration_ticks_while_a_run_goes_and_stops_when_it_ends(
        transactional_db, operator):
    """A running run's duration cell carries its start for the page to tick; the doorbell
    of its end swaps in the final duration, which no longer ticks."""
    from django.test import Client
    from django.utils import timezone

    from dashboard.models import Run

    started = timezone.now() - timezone.timedelta(seconds=30)
    run = Run.objects.create(graph="test.echo", thread_id="clock:planner", created_by=operator,
                             state=Run.State.RUNNING, started_at=started)
    client = Client()
    client.force_login(operator)
    page = client.get("/").content.decode()
    cell = re.search(rf'<td id="run-{run.id}-duration"[^>]*>(.*?)</td>', page).group(1)
    assert f'data-started="{started.isoformat()}"' in cell and "30" in cell

    since = timezone.now().isoformat()
    ended = broadcast.run_summary({
        "id": run.id, "graph": run.graph, "status": "succeeded", "current_node": "",
        "last_seq": 4, "started_at": started, "error_message": "",
        "finished_at": started + timezone.timedelta(seconds=42.5)})
    messages = async_to_sync(runs_list_hears)(operator, since,
                                               {"type": "run.changed", "run": ended})
    (frame,) = [m for m in messages if f"run-{run.id}-duration" in m]
    cell = re.search(rf'<td id="run-{run.id}-duration"[^>]*hx-swap-oob="true">(.*?)</td>',
                     frame).group(1)
    assert "data-started" not in cell and "42.5 s" in cell


def test_a_page_whose_events_were_rolled_back_shows_the_run_waiting_and_says_reload(
        executor, operator, tmp_path):
    """A LangGraph client rolls back the resume a page is following: the page hears the
    run waits at its question again, and that its trace from the resume on is gone."""
    from dashboard.models import Interrupt, Run, RunEvent

    held = tmp_path / "held"  # the steps take their delay while it exists
    run = wait_run(services.run_create(graph="test.echo", user=operator, input={
        "steps": 4, "ask": True, "delay": 30, "held_by": str(held)}).id,
        statuses=("interrupted",))
    held.touch()
    services.interrupt_answer(interrupt=Interrupt.objects.get(run=run), answer="first",
                              user=operator)
    resume = Run.objects.get(id=run.id).current_langgraph_run()

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after=0")
        assert ok
        seen = ""
        while not await database_sync_to_async(RunEvent.objects.filter(
                run=run, kind="node_started", seq__gt=resume.first_seq).exists)():
            seen += await comm.receive_from(timeout=20)
        await database_sync_to_async(services.langgraph_run_roll_back)(
            langgraph_run=resume, user=operator)
        while "Rolled back" not in seen:
            seen += await comm.receive_from(timeout=20)
        notice = seen[seen.index('<div id="trace-notice"'):]
        assert f"events from #{resume.first_seq} on are gone" in notice
        assert "Waiting for you" in seen[seen.rindex("trace-live"):]
        await comm.disconnect()

    async_to_sync(scenario)()
    assert Run.objects.get(id=run.id).state == Run.State.INTERRUPTED


def test_a_waiting_runs_waterfall_grows_between_its_events(executor, operator):
    # waiting for an answer, no event comes: the page's waterfall is drawn to now anyway,
    # its open wait reaching further each time (its axis with it)
    run = services.run_create(graph="test.echo", input={"steps": 2, "ask": True},
                              user=operator)
    run = wait_run(run.id, statuses=("interrupted",))

    async def scenario():
        comm, ok, _ = await connect(operator, f"/ws/runs/{run.id}/?after={run.last_seq}")
        assert ok
        sent = [await comm.receive_from(timeout=3)]  # the header
        while sum('id="wf-axis"' in html for html in sent) < 2:
            sent.append(await comm.receive_from(timeout=6))
        await comm.disconnect()
        return [html for html in sent if 'id="wf-axis"' in html]

    first, second = async_to_sync(scenario)()

    def end_of_axis(html: str) -> float:
        return float(re.search(r"--wf-shown: ([0-9.]+);", html).group(1))

    assert "wf-human wf-open" in first
    assert end_of_axis(second) > end_of_axis(first)
