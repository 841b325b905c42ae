"""A daphne serving Planwatch with a ``langgraph.json`` the tests write, and SDK clients.

The clients are the official ``langgraph-sdk`` from PyPI, pointed at ``/langgraph`` with
an API token in ``x-api-key``, as a user would.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission

from tests.conftest import SMALL_POOLS, api_token, free_port, need, served

JS = Path(__file__).resolve().parent / "js"
"""LangGraph's official JS client from npm (its lock file; make install-js installs it)."""

GRAPHS_PY = '''
"""Graphs a user of LangGraph's server would write: compiled, a factory, a chat."""
import asyncio
from typing import TypedDict

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


class Order(TypedDict, total=False):
    item: str
    quantity: int
    approved: str


def price(state: Order, config: RunnableConfig) -> Order:
    shop = config["configurable"].get("shop", "main")
    get_stream_writer()({"progress": f"pricing {state['item']} at {shop}"})
    return {"quantity": state.get("quantity") or 1}


def approve(state: Order) -> Order:
    answer = interrupt({"question": f"Approve {state['quantity']} x {state['item']}?"})
    return {"approved": str(answer)}


orders = StateGraph(Order)
orders.add_node("price", price)
orders.add_node("approve", approve)
orders.add_edge(START, "price")
orders.add_edge("price", "approve")
orders.add_edge("approve", END)
graph = orders.compile()  # compiled, as for LangGraph's server: Planwatch adds its saver


class Counter(TypedDict, total=False):
    count: int
    limit: int


async def tick(state: Counter) -> Counter:
    await asyncio.sleep(0.1)
    return {"count": state.get("count", 0) + 1}


def more(state: Counter) -> str:
    return "tick" if state.get("count", 0) < state.get("limit", 50) else END


def make_slow(config):  # a factory taking a config
    slow = StateGraph(Counter)
    slow.add_node("tick", tick)
    slow.add_edge(START, "tick")
    slow.add_conditional_edges("tick", more, ["tick", END])
    return slow.compile()


class Huge(TypedDict, total=False):
    n: int
    i: int


async def grow(state: Huge) -> Huge:  # a number no checkpoint can hold (msgpack: 64 bits)
    return {"n": 2**70, "i": state.get("i", 0) + 1}


def again(state: Huge) -> str:
    return "grow" if state.get("i", 0) < 300 else END


huge = StateGraph(Huge)
huge.add_node("grow", grow)
huge.add_edge(START, "grow")
huge.add_conditional_edges("grow", again, ["grow", END])


def inner_step(state: Counter) -> Counter:
    get_stream_writer()({"inner": state.get("count", 0)})
    return {"count": state.get("count", 0) + 10}


inner = StateGraph(Counter)
inner.add_node("inner_step", inner_step)
inner.add_edge(START, "inner_step")
inner.add_edge("inner_step", END)
nested = StateGraph(Counter)
nested.add_node("child", inner.compile())  # a subgraph: its events carry a namespace
nested.add_edge(START, "child")
nested.add_edge("child", END)


def ask_inside(state: Counter) -> Counter:
    more = interrupt({"question": "How many more?"})
    return {"count": state.get("count", 0) + int(more)}


asking = StateGraph(Counter)
asking.add_node("ask_inside", ask_inside)
asking.add_edge(START, "ask_inside")
asking.add_edge("ask_inside", END)
middle = StateGraph(Counter)
middle.add_node("child", asking.compile())
middle.add_edge(START, "child")
middle.add_edge("child", END)
deep = StateGraph(Counter)
deep.add_node("middle", middle.compile())  # a subgraph with a subgraph of its own, asking
deep.add_edge(START, "middle")
deep.add_edge("middle", END)


class Nap(TypedDict, total=False):
    seconds: float
    fail: str
    done: bool


async def nap(state: Nap) -> Nap:  # silent for a while, then done or failed
    await asyncio.sleep(state.get("seconds") or 0)
    if state.get("fail"):
        raise ValueError(f"cannot {state['fail']}")
    return {"done": True}


napping = StateGraph(Nap)
napping.add_node("nap", nap)
napping.add_edge(START, "nap")
napping.add_edge("nap", END)


class Review(TypedDict, total=False):
    item: str
    answer: str
    done: str


def review(state: Review) -> Review:
    return {"answer": str(interrupt({"question": f"Ship {state['item']}?"}))}


async def ship(state: Review) -> Review:  # after the answer: a long while if it says so
    await asyncio.sleep(60 if state["answer"] == "after a while" else 0)
    return {"done": f"{state['item']}: {state['answer']}"}


reviewing = StateGraph(Review)
reviewing.add_node("review", review)
reviewing.add_node("ship", ship)
reviewing.add_edge(START, "review")
reviewing.add_edge("review", "ship")
reviewing.add_edge("ship", END)


def reply(state: MessagesState) -> dict:
    last = state["messages"][-1].content
    return {"messages": [AIMessage(content=f"You said: {last}")]}


def confirm(state: MessagesState) -> dict:
    ok = interrupt({"question": "Send the reply?"})
    return {"messages": [AIMessage(content="Sent." if ok else "Kept.")]}


async def make_chat():  # an async factory with no argument
    chat = StateGraph(MessagesState)
    chat.add_node("reply", reply)
    chat.add_node("confirm", confirm)
    chat.add_edge(START, "reply")
    chat.add_edge("reply", "confirm")
    chat.add_edge("confirm", END)
    return chat


# -- an agent with a runtime context and long-term memory (LangGraph's store) ----------
from dataclasses import dataclass

from langgraph.config import get_store
from langgraph.runtime import get_runtime


@dataclass
class AgentContext:
    model: str = "unset"
    user: str = "nobody"


class Turn(TypedDict, total=False):
    remember: str
    reply: str
    memories: list


async def recall(state: Turn) -> Turn:
    ctx = get_runtime(AgentContext).context
    store = get_store()
    if state.get("remember"):
        await store.aput(("memories", ctx.user), state["remember"], {"text": state["remember"]})
    found = await store.asearch(("memories", ctx.user), limit=10)
    return {"reply": f"{ctx.model} for {ctx.user}",
            "memories": sorted(item.value["text"] for item in found)}


def make_agent(config, runtime):  # a factory taking the config and the server runtime
    # called at start-up (inspection) and for each run, as LangGraph's server calls it
    assert runtime.access_context in ("assistants.read", "threads.create_run")
    assert runtime.store is not None
    agent = StateGraph(Turn, context_schema=AgentContext)
    agent.add_node("recall", recall)
    agent.add_edge(START, "recall")
    agent.add_edge("recall", END)
    return agent.compile()


async def make_bare(runtime):  # an async factory taking the runtime only
    return make_agent({}, runtime)
'''

ROUTES_PY = '''
"""A user's custom routes (langgraph.json's http.app), as LangGraph's server mounts them."""
from fastapi import FastAPI, Request

app = FastAPI(title="Shop routes")


@app.get("/shop/hours")
async def hours() -> dict:
    """When the shop is open: public, the app checks no caller."""
    return {"open": "9-17"}


@app.get("/shop/whoami")
async def whoami(request: Request) -> dict:
    """Who calls, as Planwatch passes the caller (only with enable_custom_route_auth)."""
    user = request.scope.get("user")
    return {"identity": getattr(user, "identity", None)}


@app.get("/info")
async def info() -> dict:
    """A route on a path Planwatch serves: never reached."""
    return {"shadowed": True}


@app.post("/threads/search")
async def search() -> list:
    """Another: Planwatch's thread search stays Planwatch's."""
    return [{"shadowed": True}]
'''

PERMS = ["start_run", "cancel_run", "answer_interrupt", "debug_run", "fork_run", "delete_run"]


@pytest.fixture(scope="session")
def langgraph_json(tmp_path_factory) -> Path:
    """A user's project: graphs.py and the langgraph.json naming them (and one broken), and
    routes.py, its custom routes."""
    root = tmp_path_factory.mktemp("user-project")
    (root / "graphs.py").write_text(GRAPHS_PY)
    (root / "routes.py").write_text(ROUTES_PY)
    config = root / "langgraph.json"
    config.write_text(json.dumps({
        "dependencies": ["."],
        "graphs": {"orders": "./graphs.py:graph", "slow": "graphs:make_slow",
                   "chat": "./graphs.py:make_chat", "nested": "./graphs.py:nested",
                   "deep": "./graphs.py:deep", "nap": "./graphs.py:napping",
                   "review": "./graphs.py:reviewing",
                   "huge": "./graphs.py:huge",
                   "agent": "./graphs.py:make_agent", "bare": "./graphs.py:make_bare",
                   "broken": "./missing.py:graph"},
        "http": {"app": "./routes.py:app"},  # custom routes, public as on LangGraph's server
    }))
    return config


@pytest.fixture(scope="session")
def ui_origin(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A static web server on another origin, as a chat UI's page would come from; yields
    its origin and the folder it serves."""
    folder = tmp_path_factory.mktemp("chat-ui")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", folder
    server.shutdown()


@pytest.fixture(scope="session")
def js_client(ui_origin) -> Path:
    """The official JS client bundled into the UI origin's folder, as a page imports it."""
    esbuild = JS / "node_modules" / ".bin" / "esbuild"
    need("node and the JS client", bool(shutil.which("node")) and esbuild.exists(),
         "install Node.js and npm, then: npm ci --prefix tests/lgserver/js (make test does)")
    target = ui_origin[1] / "langgraph-sdk.js"
    subprocess.run([str(esbuild), "entry.js", "--bundle", "--format=esm", "--platform=browser",
                    "--log-level=error", f"--outfile={target}"], cwd=JS, check=True)
    return target


@pytest.fixture(scope="session")
def lg_url(django_db_setup, django_db_blocker, langgraph_json, ui_origin) -> Iterator[str]:
    """Planwatch with the user's langgraph.json, at its LangGraph API's base URL (pages
    from ``ui_origin`` may call it)."""
    with served(django_db_blocker, PLANWATCH_LANGGRAPH_CONFIG=str(langgraph_json),
                PLANWATCH_THINK_TIME="0.01", PLANWATCH_CORS_ORIGINS=ui_origin[0],
                PLANWATCH_CRON_POLL_SECONDS="0.2", **SMALL_POOLS) as url:
        yield f"{url}/langgraph"


@pytest.fixture
def sdk_user(django_user_model):
    """A user holding every run permission."""
    user = django_user_model.objects.create_user(username="sdk", password="pw-sdk-12345")
    user.user_permissions.set(Permission.objects.filter(codename__in=PERMS))
    return user


@pytest.fixture
def sdk(lg_url, sdk_user):
    """The official sync client, with the user's token as ``x-api-key``."""
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=lg_url, api_key=api_token(sdk_user))


def watch_problems(page) -> list[str]:
    """The console errors, page errors and failed requests of a page calling /langgraph/
    from another origin (a CORS refusal shows as one of these).

    Chromium reports a fetch whose body was read to its end through a stream reader as
    ERR_ABORTED (the same response read with text() is not; curl sees the terminating
    chunk): as tests/browser's watch does, ERR_ABORTED is not counted as a failure.
    """
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("requestfailed", lambda r: "ERR_ABORTED" not in (r.failure or "")
            and problems.append(f"{r.url} {r.failure}"))
    return problems
