"""Steps of an operator in the browser tests: start a run from the form, wait for the
trace header's status, check the timeline's rows against the run's log."""

from __future__ import annotations

from playwright.sync_api import expect

from dashboard.models import Run
from tests.browser.conftest import fill_start_form, no_overflow, submit_start_form
from tests.conftest import screenshot, wait_run

# What the keyboard types into a question, by its field (selects take the next option).
TYPED = {"core.region": "Germany", "core.currency": "EUR", "market.price": "47.88"}


def size_name(page) -> str:
    """``phone`` or ``desktop``, by the page's width."""
    return "phone" if page.viewport_size["width"] < 600 else "desktop"


def shot(page, name: str) -> None:
    """The whole page, and what the operator sees first (the screen without scrolling)."""
    path = screenshot(page, f"operator-{name}-{size_name(page)}")
    page.screenshot(path=str(path).replace(".png", "-screen.png"))


def start_from_form(page, base: str, graph: str, fields: dict[str, str]) -> Run:
    """Start ``graph`` through the new-run form and land on its trace page."""
    page.goto(f"{base}/runs/new/?graph={graph}")
    no_overflow(page)
    shot(page, f"new-{graph}")
    fill_start_form(page, fields)
    return submit_start_form(page)


def header_says(page, status: str) -> None:
    """Wait until the trace page's header shows the run ``status`` (up to 30 s)."""
    expect(page.locator("#trace-status")).to_have_text(status, timeout=30_000)


def rows_match_the_log(page, run: Run, until: tuple[str, ...] = Run.FINISHED) -> list[int]:
    """Wait until the page rendered the run's last event; return its rows' seqs (DOM order)."""
    run = wait_run(run.id, statuses=until)
    page.wait_for_function(
        f"() => document.getElementById('trace-cursor').dataset.lastSeq === '{run.last_seq}'",
        timeout=30_000,
    )
    shown = [int(s) for s in page.locator("#trace-timeline [data-seq]").evaluate_all(
        "rows => rows.map(r => r.dataset.seq)")]
    # every event once; in row order (a node run holds its events), not seq order
    assert sorted(shown) == list(run.events.order_by("seq").values_list("seq", flat=True))
    assert len(shown) == len(set(shown))
    return shown
