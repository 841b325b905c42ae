"""Agent Chat UI's requests, made by its client library (``@langchain/langgraph-sdk``) in
Chromium on another origin: a chat whose interrupt is answered with Approve and, on the
next turn, with Edit (``input: {}`` beside ``command.resume``, as the UI sends them), and a
planner started from a chat message whose questions are answered from their
``action_requests`` (edit, approve a suggestion, edit) to its result, its transcript read
from ``values.messages``. Every streamed message
carries an id (the UI drops those without) and
the thread's history is one chain (no false branch switchers).
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from dashboard.models import Interrupt, Run
from tests.conftest import api_token, screenshot
from tests.lgserver.conftest import watch_problems

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAGE = """<!doctype html>
<meta charset="utf-8"><title>chat ui (langgraph-sdk)</title><link rel="icon" href="data:,">
<p id="status">idle</p><pre id="result"></pre>
<script type="module">
import { Client } from "./langgraph-sdk.js";
const query = new URLSearchParams(location.search);
const client = new Client({ apiUrl: query.get("api"), apiKey: query.get("key") });
const modes = ["values", "messages-tuple"];
const seen = { messages: [], questions: [] };
// as Agent Chat UI's stream: messages by id, the question from values.__interrupt__
async function follow(parts) {
  for await (const part of parts) {
    if (part.event === "messages") seen.messages.push(part.data[0]);
    if (part.event === "values" && part.data.__interrupt__) {
      seen.questions.push(part.data.__interrupt__[0].value);
    }
    if (part.event === "error") throw new Error(JSON.stringify(part.data));
  }
}
const say = (text) => ({ messages: [{ type: "human", content: text }] });
const resume = (decision) => ({ input: {}, command: { resume: { decisions: [decision] } },
                                streamMode: modes });
try {
  const chat = await client.threads.create();
  await follow(client.runs.stream(chat.thread_id, "chat", { input: say("hello"),
                                                             streamMode: modes }));
  await follow(client.runs.stream(chat.thread_id, "chat", resume({ type: "approve" })));
  await follow(client.runs.stream(chat.thread_id, "chat", { input: say("again"),
                                                             streamMode: modes }));
  await follow(client.runs.stream(chat.thread_id, "chat", resume(
    { type: "edit", edited_action: { name: "confirm", args: { send: true } } })));
  const state = await client.threads.getState(chat.thread_id);
  const history = await client.threads.getHistory(chat.thread_id, { limit: 100 });

  const plan = await client.threads.create();
  await follow(client.runs.stream(plan.thread_id, "acquisition", {
    input: say("Estimate the TAM of a budgeting app"), streamMode: modes }));
  const asked = seen.questions.at(-1).action_requests[0];
  await follow(client.runs.stream(plan.thread_id, "acquisition", resume(
    { type: "edit", edited_action: { name: asked.name, args: { answer: "Germany" } } })));
  const planned = await client.threads.getState(plan.thread_id);
  // on to the result: the suggested currency approved, the price typed in an edit
  await follow(client.runs.stream(plan.thread_id, "acquisition", resume({ type: "approve" })));
  const price = (await client.threads.getState(plan.thread_id))
    .tasks[0].interrupts[0].value.action_requests[0];
  await follow(client.runs.stream(plan.thread_id, "acquisition", resume(
    { type: "edit", edited_action: { name: price.name, args: { answer: "47.88" } } })));
  const ended = await client.threads.getState(plan.thread_id);
  const finished = await client.threads.get(plan.thread_id);
  document.getElementById("result").textContent = JSON.stringify({
    chat: chat.thread_id, plan: plan.thread_id, seen,
    said: state.values.messages.map((m) => [m.content, m.id]),
    chain: history.map((s) => [s.checkpoint.checkpoint_id,
                               s.parent_checkpoint && s.parent_checkpoint.checkpoint_id]),
    asked, region: planned.values.values["core.region"],
    // Agent Chat UI renders values.messages: every message needs an id
    transcript: planned.values.messages.map((m) => [m.type, m.content, m.id]),
    next: planned.tasks[0].interrupts[0].value.action_requests[0].name,
    price: price.name, status: finished.status, left: ended.next,
    result: ended.values.messages.map((m) => [m.type, m.content, m.id]),
  });
  document.getElementById("status").textContent = "done";
} catch (error) {
  document.getElementById("status").textContent = `failed: ${error}`;
}
</script>
"""


def test_agent_chat_uis_requests_chat_approve_edit_and_a_planner_question(
        browser, lg_url, ui_origin, js_client, sdk_user):
    origin, folder = ui_origin
    (folder / "chat-ui.html").write_text(PAGE)
    context = browser.new_context(viewport={"width": 900, "height": 700})
    page = context.new_page()
    problems = watch_problems(page)
    try:
        page.goto(f"{origin}/chat-ui.html?api={lg_url}&key={api_token(sdk_user)}")
        expect(page.locator("#status")).to_have_text("done", timeout=60_000)
        result = json.loads(page.locator("#result").inner_text())
        screenshot(page, "lgserver-chat-ui-client")
    finally:
        context.close()
    assert not problems, problems

    # the chat: both turns answered (Approve, then Edit), in one Planwatch run each
    assert [c for c, _ in result["said"]] == [
        "hello", "You said: hello", "Sent.", "again", "You said: again", "Sent."]
    streamed, planned = result["seen"]["messages"][:4], result["seen"]["messages"][4:]
    assert [m["content"] for m in streamed] == [
        "You said: hello", "Sent.", "You said: again", "Sent."]
    # each with the id its state keeps (the UI merges the two by id)
    assert [m["id"] for m in streamed] == [i for c, i in result["said"] if c != "hello"
                                           and c != "again"]
    chain = result["chain"]
    assert [parent for _, parent in chain] == [cid for cid, _ in chain[1:]] + [None]
    runs = Run.objects.filter(conversation_id=result["chat"]).order_by("created_at")
    assert [r.status for r in runs] == [Run.Status.SUCCEEDED] * 2
    answers = Interrupt.objects.filter(run__in=runs).order_by("created_at")
    assert [a.answer["decisions"][0]["type"] for a in answers] == ["approve", "edit"]

    # the planner: its question offered as an action request, answered by an edit
    assert result["asked"]["name"] == "core.region"
    assert result["asked"]["description"].startswith("Which region")
    assert "Germany" not in result["asked"]["description"]  # 249 choices are not prose
    # its transcript, as the UI reads it: the goal, the question, the answer, the next one
    transcript = result["transcript"]
    assert [(kind, text.split("\n")[0]) for kind, text, _ in transcript] == [
        ("human", "Estimate the TAM of a budgeting app"),
        ("ai", "Which region should the market be sized for?"),
        ("human", "Germany"),
        ("ai", "Which currency should prices and the TAM use (ISO 4217 code)?")]
    assert all(message_id for _, _, message_id in transcript)
    assert result["region"] == "Germany" and result["next"] == "core.currency"
    question = Interrupt.objects.filter(run__conversation_id=result["plan"]).earliest(
        "created_at")
    assert question.answer == "Germany" and question.answered_by_name == "sdk"
    # through its last question to the result, read as the UI reads it: values.messages
    assert result["price"] == "market.price"
    assert result["status"] == "idle" and result["left"] == []
    said = result["result"]
    assert said[:4] == transcript and all(message_id for _, _, message_id in said)
    assert [text for kind, text, _ in said if kind == "human"][1:] == [
        "Germany", "EUR", "47.88"]
    # its questions and result streamed as they were said, with the ids the state keeps
    assert [m["id"] for m in planned] == [i for kind, _, i in said if kind == "ai"]
    kind, final, _ = said[-1]
    assert kind == "ai" and final.startswith("TAM ") and " EUR a year." in final
    assert "TAM = population \u00d7 adoption rate \u00d7 yearly price = " in final
    [plan_run] = Run.objects.filter(conversation_id=result["plan"])
    assert plan_run.status == Run.Status.SUCCEEDED
