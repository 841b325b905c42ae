"""Agent Inbox's reading of a run paused at its budget, with LangGraph's official JS client
(``@langchain/langgraph-sdk``, the client Agent Inbox is built on) in Chromium on another
origin: it searches the interrupted threads, reads each one's ``HumanInterrupt`` from
``thread.interrupts`` (description, ``action_request``, ``config``), and answers as Agent
Inbox does (``command.resume`` with ``[{type: "edit" | "ignore", args}]``): an edited
extension lets the run go on and finish, an ignore stops it at its budget."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from dashboard.models import Run
from dashboard.runs.outcome import Outcome
from tests.conftest import api_token, screenshot
from tests.lgserver.conftest import watch_problems

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GOAL = {"goal": "Write a briefing on solar power"}

PAGE = """<!doctype html>
<meta charset="utf-8"><title>inbox (langgraph-sdk)</title><link rel="icon" href="data:,">
<h1>Inbox</h1><ul id="inbox"></ul><p id="status">loading</p>
<script type="module">
import { Client } from "./langgraph-sdk.js";
const query = new URLSearchParams(location.search);
const client = new Client({ apiUrl: query.get("api"), apiKey: query.get("key") });
const status = (text) => { document.getElementById("status").textContent = text; };
const button = (label, onClick) => {
  const b = document.createElement("button"); b.textContent = label;
  b.addEventListener("click", onClick); return b;
};
// as Agent Inbox: a thread's HumanInterrupt is the first of thread.interrupts' values
async function load() {
  const threads = await client.threads.search({
    status: "interrupted", metadata: { graph_id: "decomposition" }, limit: 100 });
  const list = document.getElementById("inbox");
  list.replaceChildren();
  for (const thread of threads) {
    const [interrupt] = Object.values(thread.interrupts ?? {}).flat();
    if (!interrupt) continue;
    const { action_request: request, config, description } = interrupt.value;
    const li = document.createElement("li");
    li.id = `item-${thread.thread_id}`;
    const text = document.createElement("p");
    text.className = "description"; text.textContent = description;
    const action = document.createElement("code");
    action.className = "action"; action.textContent = `${request.action} ${request.args.budget}`;
    li.append(text, action);
    if (config.allow_edit) {
      const field = document.createElement("input");
      field.className = "extend_by"; field.value = request.args.extend_by;
      li.append(field, button("Submit", () => answer(thread.thread_id, [{ type: "edit",
        args: { action: request.action,
                args: { ...request.args, extend_by: Number(field.value) } },
      }])));
    }
    if (config.allow_ignore) {
      li.append(button("Ignore", () => answer(thread.thread_id, [{ type: "ignore", args: null }])));
    }
    list.append(li);
  }
  status(`listed ${list.children.length}`);
}
async function answer(threadId, response) {
  status("answering");
  const run = await client.runs.create(threadId, "decomposition", {
    command: { resume: response } });
  await client.runs.join(threadId, run.run_id);
  const thread = await client.threads.get(threadId);
  await load();
  status(`answered ${threadId} ${thread.status}`);
}
load().catch((error) => status(`failed ${error}`));
</script>
"""


def _paused(sdk, budget: dict) -> str:
    tid = sdk.threads.create()["thread_id"]
    sdk.runs.wait(tid, "decomposition", input=GOAL,
                  config={"configurable": {"budget": {**budget, "on_limit": "pause"}}})
    assert Run.objects.get(conversation_id=tid).state == Run.State.PAUSED
    return tid


def test_agent_inbox_lists_a_budget_pause_and_extends_or_stops_it(
        browser, sdk, lg_url, ui_origin, js_client, sdk_user):
    goes_on = _paused(sdk, {"max_wall_minutes": 0})
    stops = _paused(sdk, {"max_model_calls": 1})
    origin, folder = ui_origin
    (folder / "budget-inbox.html").write_text(PAGE)
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    page = context.new_page()
    problems = watch_problems(page)
    try:
        page.goto(f"{origin}/budget-inbox.html?api={lg_url}&key={api_token(sdk_user)}")
        expect(page.locator("#status")).to_have_text("listed 2", timeout=30_000)
        first = page.locator(f"#item-{goes_on}")
        expect(first.locator(".description")).to_contain_text(
            "Wall time budget of 0.0 min reached")
        expect(first.locator(".action")).to_have_text("budget max_wall_minutes")
        second = page.locator(f"#item-{stops}")
        expect(second.locator(".description")).to_contain_text(
            "Model calls budget of 1 reached (1 used): extend by 1 (accept)")
        expect(second.locator(".extend_by")).to_have_value("1")
        screenshot(page, "lgserver-budget-inbox-listed")

        first.locator(".extend_by").fill("60")
        first.get_by_role("button", name="Submit").click()
        expect(page.locator("#status")).to_have_text(f"answered {goes_on} idle",
                                                     timeout=30_000)
        expect(page.locator(f"#item-{goes_on}")).to_have_count(0)
        second.get_by_role("button", name="Ignore").click()
        expect(page.locator("#status")).to_have_text(f"answered {stops} error",
                                                     timeout=30_000)
        expect(page.locator("#inbox li")).to_have_count(0)
        screenshot(page, "lgserver-budget-inbox-answered")
    finally:
        context.close()
    assert not problems, problems

    extended = Run.objects.get(conversation_id=goes_on)
    assert (extended.outcome, extended.budget["max_wall_minutes"]) == (Outcome.SUCCEEDED, 60)
    assert Run.objects.get(conversation_id=stops).outcome == Outcome.BUDGET_EXCEEDED
