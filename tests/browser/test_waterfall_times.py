"""The waterfall tells when the work happened, in real Chromium: a ``langgraph.json`` graph
whose nodes take known times (a sleep, a loopback OpenAI-compatible model that answers
after a known delay) is drawn with its bars in order, a model call inside the node that made
it, and widths no shorter than the times the work is known to have taken; the header's
working time is the waterfall's and the API's."""

from __future__ import annotations

import textwrap

import pytest

from dashboard import services
from dashboard.models import Run
from tests.browser.conftest import DESKTOP
from tests.conftest import ARTIFACTS, login, wait_run
from tests.graphs import langgraph_json_graph

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PREP, MODEL, FINISH = 0.25, 0.4, 0.15
"""Seconds: ``prep`` sleeps, the model answers ``think`` after, ``finish`` sleeps."""

PACED_GRAPH = textwrap.dedent(f'''
    import asyncio
    from typing import Annotated, TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    from tests.openai_server import chat_model


    class State(TypedDict):
        messages: Annotated[list, add_messages]


    async def prep(state):
        await asyncio.sleep({PREP})
        return {{}}


    async def think(state):
        return {{"messages": [await chat_model().ainvoke(state["messages"])]}}


    async def finish(state):
        await asyncio.sleep({FINISH})
        return {{}}


    builder = StateGraph(State)
    for name, node in (("prep", prep), ("think", think), ("finish", finish)):
        builder.add_node(name, node)
    builder.add_edge(START, "prep")
    builder.add_edge("prep", "think")
    builder.add_edge("think", "finish")
    builder.add_edge("finish", END)
    graph = builder.compile()
''')

GEOMETRY = """() => {
  const wf = document.getElementById('trace-waterfall');
  const seconds = parseFloat(getComputedStyle(wf).getPropertyValue('--wf-shown'));
  const out = {seconds, bars: {}};
  wf.querySelectorAll('#wf-rows .wf-row').forEach(row => {
    const name = row.querySelector('.wf-name').textContent.trim();
    const bar = row.querySelector('.wf-bar'), track = row.querySelector('.wf-track');
    if (!bar) return;
    const b = bar.getBoundingClientRect(), t = track.getBoundingClientRect();
    const key = row.classList.contains('wf-k-model') ? 'model' : name;
    out.bars[key] = {left: (b.left - t.left) / t.width * seconds,
                     right: (b.right - t.left) / t.width * seconds, px: b.width};
  });
  return out;
}"""


@pytest.fixture
def paced_graph(tmp_path, openai_server):
    """The graph ``paced`` of ``langgraph.json``, its model answering after ``MODEL`` s."""
    openai_server.delay = MODEL
    with langgraph_json_graph(tmp_path, name="paced", module="paced_graph", source=PACED_GRAPH):
        yield "paced"


@pytest.mark.parametrize("page", [DESKTOP], indirect=True, ids=["1400"])
def test_bars_of_known_delays_are_in_order_nested_and_as_long_as_the_work(
        live_server_url, page, executor, operator, paced_graph):
    run = wait_run(services.run_create(graph=paced_graph, input={"messages": [
        {"role": "user", "content": "hello"}]}, user=operator).id)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    login(page, live_server_url, "olga", "pw-olga-1234")
    page.goto(f"{live_server_url}/runs/{run.id}/")
    page.locator("#trace-waterfall").screenshot(path=str(ARTIFACTS / "waterfall-paced.png"))
    drawn = page.evaluate(GEOMETRY)
    bars, slack = drawn["bars"], drawn["seconds"] / 400  # a pixel or so of rounding
    prep, think, call, finish = (bars[k] for k in ("prep", "think", "model", "finish"))
    # in the order they ran, one after the other
    assert prep["right"] <= think["left"] + slack and think["right"] <= finish["left"] + slack
    # the model call lies inside the node that made it
    assert think["left"] - slack <= call["left"] and call["right"] <= think["right"] + slack
    # each as long as the work it is known to have taken (a loaded machine adds, never cuts)
    for bar, known in ((prep, PREP), (call, MODEL), (think, MODEL), (finish, FINISH)):
        assert bar["right"] - bar["left"] >= known * 0.97 - slack, (bar, known, drawn)
    # the run's length bounds them all: the axis is the run
    assert finish["right"] <= drawn["seconds"] + slack

    # one working time: the header's, the waterfall's and the API's
    header = page.locator("#trace-working").inner_text()
    summary = page.locator("#trace-waterfall .wf-working b").first.inner_text()
    detail = page.request.get(f"{live_server_url}/api/runs/{run.id}/").json()  # as olga
    assert "figures" in detail, detail
    api = detail["figures"]["working_seconds"]
    assert header == summary, (header, summary)
    value, unit = header.split()
    shown = float(value) / (1000 if unit == "ms" else 1)
    assert abs(shown - api) < 0.05 and api >= (PREP + MODEL + FINISH) * 0.97, (header, api)
