"""Browser fixtures: every page is watched for console errors and failed requests.

A test fails at teardown if the page logged a console error, threw, or saw a request fail
or answer 4xx/5xx, unless the test said it expects that status (``page.expect_status``).
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from dashboard.models import Run

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}


class Watch:
    """What went wrong in a page: console errors, page errors, failed or refused requests."""

    def __init__(self, base: str) -> None:
        self.base_host = urlparse(base).netloc if base else ""
        self.problems: list[str] = []
        self.expected: set[int] = set()
        self.foreign: list[str] = []

    def attach(self, page) -> None:
        """Listen to ``page``'s console, errors and requests."""
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)
        page.on("request", self._request)

    def _console(self, msg) -> None:
        if msg.type != "error":
            return
        status = re.search(r"status of (\d{3})", msg.text)
        if status and int(status.group(1)) in self.expected:
            return
        self.problems.append(f"console error: {msg.text} at {msg.location}")

    def _failed(self, request) -> None:
        failure = request.failure or ""
        if "ERR_ABORTED" in failure:
            return  # the page navigated away while this was still loading
        self.problems.append(f"request failed: {request.method} {request.url} ({failure})")

    def _response(self, response) -> None:
        if response.status >= 400 and response.status not in self.expected:
            self.problems.append(f"HTTP {response.status}: {response.request.method} "
                                 f"{response.url}")

    def _request(self, request) -> None:
        host = urlparse(request.url).netloc
        if request.url.startswith(("http:", "https:", "ws:", "wss:")) and host != self.base_host:
            self.foreign.append(request.url)


def watched(browser, base: str, viewport: dict[str, int] = DESKTOP, **options):
    """A fresh context (Playwright ``options`` added) and page on ``base``, watched;
    ``report()`` closes it and fails on the problems it saw."""
    context = browser.new_context(viewport=viewport, **options)
    page = context.new_page()
    watch = Watch(base)
    watch.attach(page)
    page.expect_status = watch.expected.add  # a test that provokes a 4xx says so
    page.watch = watch

    def report() -> None:
        context.close()
        problems = watch.problems + [f"request to another host: {u}" for u in watch.foreign]
        assert not problems, "the browser saw problems:\n" + "\n".join(problems)

    return page, report


@pytest.fixture
def page(browser, request):
    """A fresh context and page (1400 px unless the test asks for ``viewport``), watched."""
    viewport = getattr(request, "param", None) or DESKTOP
    base = request.getfixturevalue("live_server_url") \
        if "live_server_url" in request.fixturenames else ""
    page, report = watched(browser, base, viewport)
    yield page
    report()


def no_overflow(page) -> None:
    """The page lays out within the window: nothing wider than the screen."""
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth,"
        " [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right"
        " > window.innerWidth + 1 && getComputedStyle(e).position !== 'fixed')"
        ".slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)]")
    assert widths[0] <= widths[1], f"{page.url} lays out at {widths[0]} px in {widths[1]}: " \
        f"{widths[2]}"


def at_both_widths(page, name: str) -> None:
    """The page as it stands, laid out within the screen at 1400 px and at 390 px, with a
    screenshot of each (``<name>-desktop``, ``<name>-phone``): a test whose steps do not
    depend on the width drives them once and checks the layout at both."""
    from tests.conftest import screenshot

    was = page.viewport_size
    for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        no_overflow(page)
        screenshot(page, f"{name}-{size}")
    page.set_viewport_size(was)


def fill_start_form(page, fields: dict[str, str], before: tuple[str, ...] = ()) -> None:
    """Fill the new-run form on ``page`` as a user would: each of ``fields`` by its kind
    (a select, a checkbox, a text box), and a breakpoint before each node of ``before``."""
    for name, value in fields.items():
        field = page.locator(f"#start-form [name={name}]")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        elif field.get_attribute("type") == "checkbox":
            field.check()
        else:
            field.fill(value)
    if before:
        page.locator("#start-form details.start-breakpoints summary").click()
        for node in before:
            page.check(f"#start-form input[name=bp-interrupt_before][value={node}]")


def submit_start_form(page) -> Run:
    """Send the new-run form; the run it started, once its page is there."""
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}/$"))
    return Run.objects.get(id=page.url.rstrip("/").rsplit("/", 1)[1])


def start_run(page, base: str, graph: str, fields: dict[str, str],
              before: tuple[str, ...] = ()) -> Run:
    """Start ``graph`` through /runs/new/ (with breakpoints ``before``); land on its page."""
    page.goto(f"{base}/runs/new/?graph={graph}")
    fill_start_form(page, fields, before)
    return submit_start_form(page)


def start_paused_before_decide(page, base: str) -> Run:
    """An acquisition run started through the form with a breakpoint before ``decide``,
    where it pauses; the form, its breakpoints open, lays out within the screen."""
    page.goto(f"{base}/runs/new/?graph=acquisition")
    fill_start_form(page, {"region": "Germany", "currency": "EUR"}, before=("decide",))
    no_overflow(page)
    return submit_start_form(page)


SERIOUS = ("serious", "critical")


def axe_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it stands, one line each
    (each node by its selector and its HTML: a selector alone may say only :root)."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page).response["violations"]
    return [f"{page.url} [{v['impact']}] {v['id']}: {v['help']} — "
            + "; ".join(" ".join(n["target"]) + " " + n.get("html", "")[:200] + " "
                        + (n.get("failureSummary") or "").replace("\n", " ")
                        for n in v["nodes"][:4])
            for v in found if v["impact"] in SERIOUS]


def accessible(page) -> None:
    """Fail when axe-core finds a serious or critical violation on the page."""
    bad = axe_violations(page)
    assert not bad, "axe-core found:\n" + "\n".join(bad)
