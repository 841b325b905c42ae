"""LangGraph's official JS client (``@langchain/langgraph-sdk`` from npm, the client Agent
Chat UI and Agent Inbox are built on) runs in Chromium on another origin against
Planwatch: it streams a chat graph's reply in ``messages-tuple`` mode, shows its
``interrupt()`` question from the ``values`` stream's ``__interrupt__`` as the UI's
interrupt card does, and resumes it with ``command: {resume: …}``. The same run is in
Planwatch's log, inbox and trace.

The client is bundled for the browser from ``tests/lgserver/js/node_modules`` (``make
test`` installs it with ``npm ci``) by the esbuild installed beside it.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from dashboard.models import Interrupt, Run, RunEvent
from tests.conftest import api_token, assert_gapless, login, screenshot
from tests.lgserver.conftest import watch_problems

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAGE = """<!doctype html>
<meta charset="utf-8"><title>chat (langgraph-sdk)</title><link rel="icon" href="data:,">
<form id="ask"><input id="text" value="hello from the JS client"><button>Send</button></form>
<ol id="log"></ol>
<div id="interrupt" hidden><p id="question"></p><button id="approve">Approve</button></div>
<p id="status">idle</p>
<script type="module">
import { Client } from "./langgraph-sdk.js";
const query = new URLSearchParams(location.search);
const client = new Client({ apiUrl: query.get("api"), apiKey: query.get("key") });
const say = (who, text) => {
  const li = document.createElement("li"); li.textContent = `${who}: ${text}`;
  document.getElementById("log").append(li);
};
let thread = null;
// as Agent Chat UI: values + messages-tuple; a question arrives as values.__interrupt__
async function follow(parts) {
  for await (const part of parts) {
    if (part.event === "messages") {
      const [message] = part.data;
      if (message.type === "ai") say("bot", message.content);
    } else if (part.event === "values" && part.data.__interrupt__) {
      document.getElementById("question").textContent = part.data.__interrupt__[0].value.question;
      document.getElementById("interrupt").hidden = false;
    } else if (part.event === "error") {
      say("error", JSON.stringify(part.data));
    }
  }
}
document.getElementById("ask").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = document.getElementById("text").value;
  say("me", text);
  thread = await client.threads.create();
  await follow(client.runs.stream(thread.thread_id, "chat", {
    input: { messages: [{ type: "human", content: text }] },
    streamMode: ["values", "messages-tuple"],
  }));
  document.getElementById("status").textContent = `asked ${thread.thread_id}`;
});
document.getElementById("approve").addEventListener("click", async () => {
  document.getElementById("interrupt").hidden = true;
  await follow(client.runs.stream(thread.thread_id, "chat", {
    command: { resume: true }, streamMode: ["values", "messages-tuple"],
  }));
  const state = await client.threads.getState(thread.thread_id);
  document.getElementById("status").textContent =
    `done ${thread.thread_id} ${state.values.messages.length} messages`;
});
</script>
"""


def test_the_official_js_client_streams_a_reply_shows_the_question_and_resumes(
        browser, lg_url, ui_origin, js_client, sdk_user):
    origin, folder = ui_origin
    (folder / "js-client.html").write_text(PAGE)
    context = browser.new_context(viewport={"width": 900, "height": 700})
    page = context.new_page()
    problems = watch_problems(page)
    try:
        page.goto(f"{origin}/js-client.html?api={lg_url}&key={api_token(sdk_user)}")
        page.click("#ask button")
        expect(page.locator("#status")).to_contain_text("asked", timeout=30_000)
        expect(page.locator("#log")).to_contain_text("bot: You said: hello from the JS client")
        expect(page.locator("#question")).to_have_text("Send the reply?")
        thread_id = page.locator("#status").inner_text().split()[-1]
        run = Run.objects.get(conversation_id=thread_id)
        assert run.status == Run.Status.INTERRUPTED
        question = Interrupt.objects.get(run=run)
        assert question.status == Interrupt.Status.PENDING  # in Planwatch's inbox meanwhile
        screenshot(page, "lgserver-js-client-question")

        page.click("#approve")
        expect(page.locator("#status")).to_contain_text("done", timeout=30_000)
        expect(page.locator("#log")).to_contain_text("bot: Sent.")
        expect(page.locator("#status")).to_contain_text("3 messages")
        screenshot(page, "lgserver-js-client-done")
    finally:
        context.close()
    assert not problems, problems

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED  # the resume went on in the same run
    question.refresh_from_db()
    assert question.status == Interrupt.Status.ANSWERED and question.answer is True
    assert question.answered_by_name == "sdk"
    kinds = [e.kind for e in assert_gapless(run)]
    assert kinds.count(RunEvent.Kind.INTERRUPT_ANSWERED) == 1

    # and an operator sees the whole exchange on the run's trace page
    base = lg_url.removesuffix("/langgraph")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        login(page, base, "sdk", "pw-sdk-12345")
        page.goto(f"{base}/runs/{run.id}/")
        expect(page.locator("body")).to_contain_text("Succeeded")
        expect(page.locator("body")).to_contain_text("Send the reply?")
        # a chat graph's result card is its conversation
        expect(page.locator("#trace-result .result-headline")).to_have_text(
            "Conversation of 3 messages; last reply: Sent.")
        expect(page.locator("#trace-result .result-item").nth(0)).to_contain_text(
            "hello from the JS client")
        screenshot(page, "lgserver-js-client-trace")
    finally:
        context.close()
