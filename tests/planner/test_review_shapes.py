"""A question in the standard interrupt shapes (Agent Chat UI, Agent Inbox) and back."""

from __future__ import annotations

from planner.questions import review_of, review_request

REGION = {"field": "core.region", "kind": "region", "prompt": "Which region?",
          "choices": [f"Country {i}" for i in range(249)], "suggested": "Germany"}
AUDIENCE = {"field": "5", "kind": "choice", "prompt": "Who is the audience?",
            "choices": ["council members", "residents"], "declinable": False}


def test_the_answer_is_the_argument_both_apps_read_with_the_suggestion_offered() -> None:
    offered = review_request(REGION)
    [request] = offered["action_requests"]
    assert request["args"] == request["arguments"] == {"answer": "Germany"}
    assert offered["action_request"] == {"action": "core.region", "args": {"answer": "Germany"}}
    [review] = offered["review_configs"]
    assert review["allowed_decisions"] == ["approve", "edit", "reject"]
    assert len(review["args_schema"]["properties"]["answer"]["examples"]) == 249
    assert offered["config"] == {"allow_ignore": True, "allow_respond": True,
                                 "allow_edit": True, "allow_accept": True}
    # short: the choices are counted, not listed
    assert offered["description"] == (
        "Which region?\n\nAny of 249 choices; type to search them.\n\nSuggested: Germany.")


def test_a_few_choices_are_named_and_a_question_may_refuse_to_be_declined() -> None:
    offered = review_request(AUDIENCE)
    assert offered["description"] == (
        "Who is the audience?\n\nChoose one of: council members, residents.")
    [review] = offered["review_configs"]
    assert review["allowed_decisions"] == ["edit", "reject"]  # nothing to approve
    assert review["args_schema"]["properties"]["answer"]["enum"] == AUDIENCE["choices"]
    assert offered["config"]["allow_ignore"] is False and not offered["config"]["allow_accept"]


def test_approving_without_arguments_takes_the_suggestion() -> None:
    assert review_of({"decisions": [{"type": "approve"}]}, REGION).answer == "Germany"
    assert review_of([{"type": "accept", "args": None}], REGION).answer == "Germany"
    edited = {"action": "core.region", "args": {"answer": "France"}}
    assert review_of([{"type": "edit", "args": edited}], REGION).answer == "France"
    assert review_of([{"type": "ignore", "args": None}], REGION).declined
