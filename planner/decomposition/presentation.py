"""How the decomposition planner's result is shown: its synthesis and the plan's figures."""

from __future__ import annotations

from typing import Any

from planner.presentation import ResultCard, ResultItem, generic_result_card


def present_result(output: Any) -> ResultCard:
    """The synthesis as the card's body; tasks, rounds, plans and failures as its metrics."""
    if not isinstance(output, dict) or "counts" not in output:
        return generic_result_card(output)
    # the tasks of the plans, as the task view counts them: the root is the goal itself
    # (outputs from before ``plan_counts`` count it among their tasks)
    counts = output.get("plan_counts") or output.get("counts") or {}
    failed = output.get("failed_tasks") or []
    done = output.get("status") == "done"
    headline = (f"Synthesis of {counts.get('ok', 0)} finished tasks" if done
                else f"The run {output.get('status')}: {output.get('reason') or 'no synthesis'}")
    metrics = [
        ResultItem("tasks", str(sum(counts.values()) if "plan_counts" in output
                                else output.get("tasks", 0))),
        ResultItem("rounds", str(output.get("rounds", 0))),
        ResultItem("plans", str(output.get("plans", 0))),
        *(ResultItem(f"tasks {status}", str(n)) for status, n in sorted(counts.items()) if n),
    ]
    if failed:
        metrics.append(ResultItem("failed tasks", ", ".join(map(str, failed))))
    return ResultCard(headline=headline, body=str(output.get("synthesis") or ""),
                      metrics=tuple(metrics))
