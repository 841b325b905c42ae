"""A chat page on another origin calls /langgraph/ straight from Chromium, as Agent Chat UI
does: create a thread, stream a run in ``messages-tuple`` mode, show the reply and the
graph's ``interrupt()`` question; the same run is in Planwatch's log and inbox."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from dashboard.models import Interrupt, Run
from tests.conftest import api_token, login, screenshot
from tests.lgserver.conftest import watch_problems

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAGE = """<!doctype html>
<meta charset="utf-8"><title>chat</title><link rel="icon" href="data:,">
<form id="ask"><input id="text" value="hello there"><button>Send</button></form>
<ol id="log"></ol><p id="question"></p><p id="status">idle</p>
<script type="module">
const api = new URLSearchParams(location.search).get("api");
const key = new URLSearchParams(location.search).get("key");
const headers = {"content-type": "application/json", "x-api-key": key};
const say = (who, text) => {
  const li = document.createElement("li"); li.textContent = `${who}: ${text}`;
  document.getElementById("log").append(li);
};
document.getElementById("ask").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = document.getElementById("text").value;
  say("me", text);
  const made = await fetch(`${api}/threads`, {method: "POST", headers, body: "{}"});
  const thread = await made.json();
  const response = await fetch(`${api}/threads/${thread.thread_id}/runs/stream`, {
    method: "POST", headers: {...headers, accept: "text/event-stream"},
    body: JSON.stringify({assistant_id: "chat", stream_mode: ["messages-tuple", "values"],
                          input: {messages: [{role: "user", content: text}]}})});
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\\n\\n")) >= 0) {
      const block = buffer.slice(0, end); buffer = buffer.slice(end + 2);
      const name = block.match(/^event: (.*)$/m)[1];
      const data = JSON.parse(block.match(/^data: (.*)$/m)[1]);
      if (name === "messages") say("bot", data[0].content);
      if (name === "values" && data.__interrupt__) {
        document.getElementById("question").textContent = data.__interrupt__[0].value.question;
      }
    }
  }
  document.getElementById("status").textContent = `done ${thread.thread_id}`;
});
</script>
"""


def test_a_chat_page_on_another_origin_streams_replies_and_shows_the_question(
        browser, lg_url, ui_origin, sdk_user):
    origin, folder = ui_origin
    (folder / "index.html").write_text(PAGE)
    context = browser.new_context(viewport={"width": 900, "height": 700})
    page = context.new_page()
    problems = watch_problems(page)
    try:
        page.goto(f"{origin}/index.html?api={lg_url}&key={api_token(sdk_user)}")
        page.click("button")
        expect(page.locator("#status")).to_contain_text("done", timeout=30_000)
        expect(page.locator("#log")).to_contain_text("bot: You said: hello there")
        expect(page.locator("#question")).to_have_text("Send the reply?")
        screenshot(page, "lgserver-cross-origin-chat")
        thread_id = page.locator("#status").inner_text().split()[-1]
    finally:
        context.close()
    assert not problems, problems  # no CORS refusal, no failed request
    run = Run.objects.get(conversation_id=thread_id)
    assert run.graph == "chat" and run.status == Run.Status.INTERRUPTED
    assert Interrupt.objects.get(run=run).status == Interrupt.Status.PENDING  # in the inbox

    # the operator sees the same run in Planwatch: its trace, the question, answerable
    base = lg_url.removesuffix("/langgraph")
    for width, height in ((1400, 900), (390, 844)):
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.on("console", lambda m: m.type == "error" and problems.append(m.text))
        try:
            login(page, base, "sdk", "pw-sdk-12345")
            page.goto(f"{base}/runs/{run.id}/")
            expect(page.locator("body")).to_contain_text("Send the reply?")
            screenshot(page, f"lgserver-chat-trace-{width}")
        finally:
            context.close()
    assert not problems, problems
