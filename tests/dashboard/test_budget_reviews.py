"""The interrupt a budget pause is offered as, and what each resume of it asks (the fast
layer; tests/lgserver/test_budget_interrupt.py drives them through the SDK)."""

from __future__ import annotations

import pytest

from dashboard.budget_reviews import STOP, BudgetAnswer, answer_of, budget_interrupt
from dashboard.runs.budgets import BudgetPause
from dashboard.services import BudgetError, RunStateError

RUN = "5f0c"
COST = BudgetPause(12, {"kind": "max_cost_usd", "limit": 0.5, "used": 0.52})
ID = f"planwatch-budget-{RUN}-12"


def test_the_interrupt_offers_the_budget_in_agent_inboxs_shape():
    item = budget_interrupt(RUN, COST)
    assert item["id"] == ID
    value = item["value"]
    assert value["action_request"] == {"action": "budget", "args": {
        "budget": "max_cost_usd", "limit": 0.5, "used": 0.52, "extend_by": 0.5}}
    assert value["description"] == (
        "Cost budget of $0.50 reached ($0.52 used): extend by $0.50 (accept), by another "
        'amount (edit extend_by, or respond with a number), or stop the run (ignore, or '
        'respond "stop").')
    assert value["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]


def test_a_count_is_offered_as_a_whole_extension():
    calls = BudgetPause(3, {"kind": "max_model_calls", "limit": 0, "used": 0})
    assert budget_interrupt(RUN, calls)["value"]["action_request"]["args"]["extend_by"] == 1


@pytest.mark.parametrize(("resume", "answer"), [
    # Agent Inbox: accept as offered (its action sent back), edit, respond, ignore
    ([{"type": "accept", "args": {"action": "budget", "args": {"extend_by": 0.5}}}],
     BudgetAnswer({"max_cost_usd": 0.5})),
    ([{"type": "accept", "args": None}], BudgetAnswer({"max_cost_usd": 0.5})),
    ([{"type": "edit", "args": {"action": "budget", "args": {"budget": "max_cost_usd",
                                                             "extend_by": "2"}}}],
     BudgetAnswer({"max_cost_usd": 2.0})),
    ([{"type": "response", "args": "$1.25"}], BudgetAnswer({"max_cost_usd": 1.25})),
    ([{"type": "response", "args": " Stop "}], STOP),
    ([{"type": "ignore", "args": None}], STOP),
    # Agent Chat UI: approve, edit, reject
    ({"decisions": [{"type": "approve"}]}, BudgetAnswer({"max_cost_usd": 0.5})),
    ({"decisions": [{"type": "edit", "edited_action": {"name": "budget",
                                                       "args": {"extend_by": 3}}}]},
     BudgetAnswer({"max_cost_usd": 3})),
    ({"decisions": [{"type": "reject", "message": "too dear"}]}, STOP),
    # any client: the REST API's body, an amount, "stop"; keyed by the interrupt's id
    ({"extend": {"max_tokens": 1000}}, BudgetAnswer({"max_tokens": 1000})),
    ({"stop": True}, STOP),
    (0.25, BudgetAnswer({"max_cost_usd": 0.25})),
    ("stop", STOP),
    ({ID: "0.75"}, BudgetAnswer({"max_cost_usd": 0.75})),
    ({ID: [{"type": "ignore"}]}, STOP),
])
def test_each_resume_is_an_extension_or_a_stop(resume, answer):
    assert answer_of(resume, run_id=RUN, pause=COST) == answer


@pytest.mark.parametrize("resume", [
    "more", True, None, -1, 0, float("nan"), [], {}, {"stop": False},
    {"stop": True, "extend": {"max_cost_usd": 1}}, {"extend": 5},
    [{"type": "response", "args": "a bit more"}], [{"type": "response", "args": "-2"}],
    [{"type": "edit", "args": {"action": "budget", "args": {}}}],
    [{"type": "accept", "args": {"action": "budget", "args": {"extend_by": "x"}}}],
    [{"type": "ignore"}, {"type": "ignore"}],
])
def test_any_other_resume_is_refused_saying_what_to_send(resume):
    with pytest.raises(BudgetError) as refused:
        answer_of(resume, run_id=RUN, pause=COST)
    said = refused.value.message
    assert list(refused.value.errors) == ["command.resume"]
    assert '[{"type": "response", "args": "0.5"}]' in said
    assert '{"extend": {"max_cost_usd": 0.5}}' in said and '"stop"' in said


@pytest.mark.parametrize(("resume", "field", "words"), [
    ([{"type": "edit", "args": {"action": "budget", "args": {"extend_by": 1e12}}}],
     "command.resume.extend.max_cost_usd", "largest accepted"),
    ({"extend": {"max_dollars": 1}}, "command.resume.extend.max_dollars", "unknown budget"),
])
def test_an_extension_is_checked_by_the_one_budget_parser(resume, field, words):
    with pytest.raises(BudgetError) as refused:
        answer_of(resume, run_id=RUN, pause=COST)
    assert field in refused.value.errors and words in refused.value.message


def test_a_resume_of_another_pause_names_the_open_one():
    with pytest.raises(RunStateError, match=ID):
        answer_of({f"planwatch-budget-{RUN}-3": "stop"}, run_id=RUN, pause=COST)
