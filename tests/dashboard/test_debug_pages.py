"""The debugging pages: breakpoints, continue, step, fork with a typed state edit, compare."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from dashboard import services
from dashboard.models import Run, RunEvent
from tests.conftest import wait_run

pytestmark = pytest.mark.pg

Kind = RunEvent.Kind
DONE = ("succeeded", "failed", "cancelled")


@pytest.fixture
def debugger(operator):
    operator.user_permissions.add(*Permission.objects.filter(
        codename__in=["debug_run", "fork_run"]))
    return operator


def test_a_paused_run_says_where_and_offers_continue_and_step(executor, debugger, client):
    client.force_login(debugger)
    run = services.run_create(graph="test.echo", input={"steps": 2}, user=debugger,
                              options=services.RunOptions(interrupt_before=["done"]))
    run = wait_run(run.id, statuses=("paused", *DONE))
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "Paused before" in page and ">done<" in page
    assert 'id="debug-continue"' in page and 'id="debug-step"' in page
    # the questions panel names the breakpoint, not a budget
    assert 'id="questions-paused-breakpoint"' in page and "at its budget" not in page
    response = client.post(f"/runs/{run.id}/continue/", {"step": "0"})
    assert response.status_code == 302
    assert wait_run(run.id, statuses=DONE).status == Run.Status.SUCCEEDED


def test_breakpoints_are_saved_from_the_page_and_bad_names_are_refused(executor, debugger,
                                                                        client):
    client.force_login(debugger)
    run = services.run_create(graph="test.echo", input={"steps": 2}, user=debugger,
                              options=services.RunOptions(interrupt_before=["step"]))
    run = wait_run(run.id, statuses=("paused", *DONE))
    client.post(f"/runs/{run.id}/breakpoints/", {"interrupt_after": ["step"]})
    run.refresh_from_db()
    assert (run.interrupt_before, run.interrupt_after) == ([], ["step"])
    response = client.post(f"/runs/{run.id}/breakpoints/", {"interrupt_after": ["nope"]},
                           follow=True)
    assert "Select a valid choice. nope is not one of the available choices." in \
        response.content.decode()
    run.refresh_from_db()
    assert run.interrupt_after == ["step"]


def test_debugging_needs_its_own_permissions(executor, operator, viewer, client):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 1},
                                       user=operator).id)
    checkpoint = run.events.filter(kind=Kind.CHECKPOINT).first().checkpoint_id
    client.force_login(viewer)
    assert client.post(f"/runs/{run.id}/breakpoints/", {}).status_code == 403
    assert client.post(f"/runs/{run.id}/continue/", {}).status_code == 403
    page = client.get(f"/runs/{run.id}/fork/?checkpoint={checkpoint}")
    assert page.status_code == 200 and "Forking needs" in page.content.decode()
    assert client.post(f"/runs/{run.id}/fork/", {"checkpoint": checkpoint}).status_code == 403
    assert Run.objects.count() == 1


def _echo_before_done(user) -> tuple[Run, str]:
    """A finished three-step echo run and its checkpoint before its ``done`` node (a fork
    form's starting point)."""
    parent = wait_run(services.run_create(graph="test.echo", input={"steps": 3},
                                          user=user).id)
    return parent, parent.events.filter(kind=Kind.CHECKPOINT, namespace="",
                                        payload__next=["done"]).get().checkpoint_id


def test_edit_state_and_fork_from_a_page_then_compare_the_branches(executor, debugger, client):
    client.force_login(debugger)
    parent, checkpoint = _echo_before_done(debugger)
    form = client.get(f"/runs/{parent.id}/fork/?checkpoint={checkpoint}").content.decode()
    assert 'name="ch_n"' in form and 'type="number"' in form  # typed from the state schema
    bad = client.post(f"/runs/{parent.id}/fork/", {
        "checkpoint": checkpoint, "ch_n": "lots", "ch_steps": "3", "as_node": "step"})
    assert bad.status_code == 400 and "Enter a whole number." in bad.content.decode()
    assert Run.objects.count() == 1
    response = client.post(f"/runs/{parent.id}/fork/", {
        "checkpoint": checkpoint, "ch_n": "12", "ch_steps": "3",
        "ch_trail": '["step1", "step2", "step3"]',
        "ch_fail_at": "0", "ch_delay": "0.0", "ch_route_delay": "0.0", "ch_held_by": "",
        "as_node": "step"})
    assert response.status_code == 302, response.content.decode()[:2000]
    child = Run.objects.get(parent=parent)
    assert child.fork_edit == {"values": {"n": 12}, "as_node": "step"}
    child = wait_run(child.id, statuses=DONE)
    assert child.output == {"n": 12, "answer": None}
    tree = client.get(f"/runs/{parent.id}/").content.decode()
    assert f"/runs/{child.id}/" in tree and "compare" in tree
    compare = client.get(f"/runs/{parent.id}/compare/{child.id}/").content.decode()
    assert "At the fork point" in compare and ">n<" in compare
    # asked from either side, the parent is on the left, both named by role and short id
    names = f"parent {str(parent.id)[:8]}", f"fork {str(child.id)[:8]}"
    for page in (compare, client.get(f"/runs/{child.id}/compare/{parent.id}/").content.decode()):
        heads = re.findall(r'<th scope="col">([^<]*)', page)
        assert heads[0].startswith(names[0]) and heads[1].startswith(names[1])
        assert heads.count(names[0]) == 2 and heads.count(names[1]) == 2  # both diff tables
        assert page.index("<h2>Result</h2>") < page.index("At the fork point")
        assert "None" not in page  # values as JSON: null, not Python's None


def test_a_checkpoint_in_the_admin_offers_re_run_from_here(executor, admin_client, operator):
    run = wait_run(services.run_create(graph="test.echo", input={"steps": 1},
                                       user=operator).id)
    checkpoint = run.events.filter(kind=Kind.CHECKPOINT, namespace="").last().checkpoint_id
    page = admin_client.get(f"/admin/dashboard/checkpoint/{checkpoint}/change/")
    assert page.status_code == 200
    assert f"/runs/{run.id}/fork/?checkpoint={checkpoint}" in page.content.decode()


def test_the_new_run_form_sets_breakpoints_for_those_who_may_debug(executor, debugger, client,
                                                                   viewer):
    client.force_login(debugger)
    form = client.get("/runs/new/?graph=test.echo").content.decode()
    assert 'name="bp-interrupt_before"' in form and 'value="done"' in form
    client.post("/runs/new/", {"graph": "test.echo", "steps": "2",
                               "bp-interrupt_before": ["done"]})
    run = wait_run(Run.objects.get().id, statuses=("paused", *DONE))
    assert run.status == Run.Status.PAUSED and run.interrupt_before == ["done"]
    client.force_login(viewer)
    assert 'name="bp-interrupt_before"' not in client.get("/runs/new/").content.decode()


def test_a_fork_form_reports_every_error_in_one_round_with_json_positions(
        executor, debugger, client):
    client.force_login(debugger)
    parent, checkpoint = _echo_before_done(debugger)
    bad = client.post(f"/runs/{parent.id}/fork/", {
        "checkpoint": checkpoint, "ch_n": "lots", "ch_steps": "3",
        "ch_result": '{"total": 3,\n "ok": tru}', "ch_trail": "[1, 2]", "ch_fail_at": "0",
        "ch_delay": "0.0", "ch_route_delay": "0.0", "ch_held_by": "", "as_node": "step"})
    html = bad.content.decode()
    assert bad.status_code == 400
    assert "Enter a whole number." in html                       # the form's own check
    assert "not valid JSON at line 2, column 8" in html           # where the JSON breaks
    assert "does not fit" in html and "trail" in html             # the graph's check, too
    assert "3 values need fixing; nothing was started." in html
    assert Run.objects.count() == 1


def test_a_fork_form_folds_the_graphs_bookkeeping_under_advanced(executor, debugger, client):
    client.force_login(debugger)
    run = wait_run(services.run_create(graph="acquisition", input={}, user=debugger).id)
    checkpoint = run.events.filter(kind=Kind.CHECKPOINT, namespace="").last().checkpoint_id
    html = client.get(f"/runs/{run.id}/fork/?checkpoint={checkpoint}").content.decode()
    main, advanced = html.split('<details class="state-advanced"')
    assert 'name="ch_goal"' in main and 'name="ch_values.market.price"' in main
    for internal in ("graph_version", "schema", "status", "notes"):
        assert f'name="ch_{internal}"' in advanced and f'name="ch_{internal}"' not in main


def test_a_state_edit_is_typed_per_field_with_the_graphs_own_checks(executor, debugger,
                                                                    client):
    # the acquisition planner's values are a record of fields: each is its own box, checked
    # as its question and its start form check it ("lots" is no price, "XYZ" no currency)
    client.force_login(debugger)
    run = wait_run(services.run_create(graph="acquisition", input={}, user=debugger).id)
    checkpoint = run.events.filter(kind=Kind.CHECKPOINT, namespace="").last().checkpoint_id
    url = f"/runs/{run.id}/fork/?checkpoint={checkpoint}"
    html = client.get(url).content.decode()
    boxes = dict(re.findall(r'<(?:input|textarea)[^>]*name="([^"]+)"[^>]*?(?:value="([^"]*)")?'
                            r'[^>]*>', html))
    assert {"ch_values.market.price", "ch_values.core.currency"} <= set(boxes)
    form = {name: value for name, value in boxes.items() if name.startswith("ch_")}
    goal = re.search(r'name="ch_goal"[^>]*>([^<]*)<', html)
    form.update({"ch_goal": goal.group(1) if goal else "", "checkpoint": checkpoint,
                 "ch_values.market.price": "lots", "ch_values.core.currency": "XYZ"})
    bad = client.post(f"/runs/{run.id}/fork/", form)
    page = bad.content.decode()
    assert bad.status_code == 400 and Run.objects.count() == 1
    assert "&#x27;lots&#x27; is not a number" in page
    assert "&#x27;XYZ&#x27; is not an ISO 4217 currency code" in page
    # the same check behind the API and the LangGraph API's update_state: named, refused
    errors = services.state_edit_errors(graph="acquisition",
                                        values={"values": {"market.price": "lots"}})
    assert errors == {"values.market.price": "'lots' is not a number; give a number such "
                                             "as 12.5"}
    # a good value is kept as the graph keeps it: a number, not the text typed
    from dashboard.runs import debugging
    from planner.registry import get_graph
    typed = debugging.typed_edit({"values": {"market.price": "47.5", "core.currency": "eur"}},
                                 get_graph("acquisition").state_fields({}))
    assert typed == {"values": {"market.price": 47.5, "core.currency": "EUR"}}


def test_a_fork_forms_json_holding_a_number_no_checkpoint_stores_is_refused_naming_it(
        executor, debugger, client):
    client.force_login(debugger)
    parent, checkpoint = _echo_before_done(debugger)
    bad = client.post(f"/runs/{parent.id}/fork/", {
        "checkpoint": checkpoint, "ch_n": "1",
        "ch_result": '{"total": [100000000000000000000000]}', "ch_trail": "[]",
        "ch_steps": "100000000000000000000000",
        "ch_fail_at": "0", "ch_delay": "0.0", "ch_route_delay": "0.0", "ch_held_by": "",
        "as_node": "step"})
    html = bad.content.decode()
    assert bad.status_code == 400
    assert "result.total[0] holds an integer beyond 64 bits" in html, html[-3000:]
    assert "less than or equal to 9223372036854774784" in html  # steps, a whole number
    assert Run.objects.count() == 1
