"""Graphs from a langgraph.json: each kind of attribute, failures kept apart and shown."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.management import call_command
from django.test import Client

from dashboard.models import Interrupt, Run
from dashboard.web.forms.interrupts import InterruptAnswerForm
from dashboard.web.forms.run_start import RunStartForm
from planner import registry
from planner.langgraph_config import ConfigError, load_config
from tests.lgserver.conftest import GRAPHS_PY


@pytest.fixture
def project(tmp_path):
    (tmp_path / "graphs.py").write_text(GRAPHS_PY)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "bad.py").write_text("raise RuntimeError('boom at import')\n")
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."], "graphs": {
        "orders": "./graphs.py:graph",  # compiled
        "orders_builder": "./graphs.py:orders",  # an uncompiled StateGraph
        "slow": "graphs:make_slow",  # a factory taking a config, by module name
        "chat": {"path": "./graphs.py:make_chat", "description": "Talks back"},  # async
        "missing_file": "./nope.py:graph",
        "missing_attr": "./graphs.py:nothing",
        "raises": "pkg.bad:graph",
        "not_a_graph": "./graphs.py:Order",  # callable, but makes no graph
        "acquisition": "./graphs.py:graph",  # a built-in's name
    }}))
    return config


@pytest.fixture
def registered(project):
    """The project's graphs in this process's registry, removed afterwards."""
    before = dict(registry.GRAPHS)
    registry.load_langgraph_config(str(project))
    yield project
    registry.GRAPHS.clear()
    registry.GRAPHS.update(before)
    registry.FAILED.clear()


def test_every_kind_of_attribute_loads_and_each_failure_is_kept_with_its_error(project):
    specs, failed = load_config(project)
    assert sorted(s.name for s in specs) == ["acquisition", "chat", "orders", "orders_builder",
                                             "slow"]
    assert "no file" in failed["missing_file"]
    assert "has no attribute 'nothing'" in failed["missing_attr"]
    assert failed["raises"] == "RuntimeError: boom at import"
    assert "dict is not a graph" in failed["not_a_graph"]
    chat = next(s for s in specs if s.name == "chat")
    assert chat.description == "Talks back"
    assert [f.name for f in chat.input_fields] == ["messages"]
    assert chat.input_fields[0].kind == "json"
    orders = next(s for s in specs if s.name == "orders")
    assert [(f.name, f.kind) for f in orders.input_fields] == [
        ("item", "text"), ("quantity", "integer"), ("approved", "text")]
    # the input passes to the graph as given (fields left empty dropped)
    assert orders.make_input({"item": "lamp", "quantity": None, "extra": 1}) == {
        "item": "lamp", "extra": 1}


def test_a_file_that_is_not_a_langgraph_json_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(tmp_path / "bad.json")
    (tmp_path / "empty.json").write_text("{}")
    with pytest.raises(ConfigError, match='no "graphs" object'):
        load_config(tmp_path / "empty.json")


@pytest.mark.django_db
def test_failures_are_listed_on_the_runs_page_and_by_check(registered, operator, capsys):
    assert "acquisition" in registry.failed_graphs()  # the built-in keeps its name
    assert "rename it" in registry.failed_graphs()["acquisition"]
    web = Client()
    web.force_login(operator)
    page = web.get("/").content.decode()
    assert 'id="failed-graphs"' in page and "boom at import" in page
    call_command("check")
    err = capsys.readouterr().err
    assert "planwatch.W001" in err and "missing_file" in err


@pytest.mark.django_db
def test_the_start_form_is_generated_from_the_input_schema(registered, operator):
    form = RunStartForm({"item": "lamp", "quantity": "3"}, graph=registry.get_graph("orders"))
    assert form.is_valid(), form.errors
    assert form.input_values() == {"item": "lamp", "quantity": 3, "approved": None}
    bad = RunStartForm({"quantity": "three"}, graph=registry.get_graph("orders"))
    assert not bad.is_valid() and "not a whole number" in str(bad.errors["quantity"])
    chat = RunStartForm({"messages": '[{"role": "user", "content": "hi"}'},
                        graph=registry.get_graph("chat"))
    assert not chat.is_valid() and "not valid JSON" in str(chat.errors["messages"])
    web = Client()
    web.force_login(operator)
    page = web.get("/runs/new/?graph=orders").content.decode()
    assert 'name="item"' in page and 'name="quantity"' in page


@pytest.mark.django_db
def test_a_question_asked_as_plain_text_is_answered_with_text():
    run = Run.objects.create(graph="orders", thread_id=f"{uuid.uuid4()}:planner",
                             state=Run.State.INTERRUPTED)
    plain = Interrupt.objects.create(run=run, interrupt_id="a", payload="Which city?")
    form = InterruptAnswerForm({f"i{plain.pk}-answer": "Paris"}, interrupt=plain)
    assert form.widget == "text" and form.fields["answer"].label == "Which city?"
    assert form.is_valid() and form.cleaned_data["answer"] == "Paris"
    shaped = Interrupt.objects.create(run=run, interrupt_id="b", payload={"question": "ok?"})
    json_form = InterruptAnswerForm({f"i{shaped.pk}-answer": "yes"}, interrupt=shaped)
    assert json_form.widget == "json" and not json_form.is_valid()  # JSON: "yes" in quotes
