"""Finishing an execution: where the run stands when its graph's stream ends or raises.

A stream that ends with questions pending pauses the run (interrupted, with those
questions recorded); one that ends without succeeds with the output its graph picks
(``GraphSpec.output_of``); one that raises fails with the error; an operator's cancel
cancels it. Each writes its last events together with the run's new status.
"""

from __future__ import annotations

import traceback
from typing import Any

from dashboard.models import Run, RunEvent
from dashboard.runs.jsonsafe import to_jsonable
from dashboard.runs.record import EventWriter
from dashboard.runs.store import acancelled_by
from dashboard.runs.translate import StreamTranslator
from planner.registry import GraphSpec

Kind = RunEvent.Kind


def pending_from(state: Any, translator: StreamTranslator) -> list[dict[str, Any]]:
    """The interrupts the graph now waits on, with node and namespace where known."""
    seen = {i.interrupt_id: i for i in translator.interrupts}
    pending = []
    for task in state.tasks:
        for item in task.interrupts:
            known = seen.get(item.id)
            pending.append({
                "interrupt_id": item.id,
                "node": known.node if known else task.name,
                "namespace": known.namespace if known else "",
                "payload": to_jsonable(item.value),
            })
    return pending


def is_paused(state: Any) -> bool:
    """Whether the graph's state (``aget_state``) waits on an operator's answer."""
    return state is not None and bool(
        state.interrupts or any(t.interrupts for t in state.tasks))


async def apause(writer: EventWriter, *, state: Any, translator: StreamTranslator) -> None:
    """The graph waits for answers: record its questions, nobody holds the run meanwhile."""
    await writer.afinish(status=Run.Status.INTERRUPTED, pending=pending_from(state, translator))


async def ahalt(writer: EventWriter, *, state: Any, translator: StreamTranslator,
                after: str) -> None:
    """A breakpoint (or a step) stopped the graph: say where, nobody holds the run meanwhile."""
    writer.add({"kind": Kind.RUN_PAUSED, "node": after,
                "payload": {"before": list(state.next), "after": after}})
    if not after and state.next:
        writer.current_node = state.next[0]
    await writer.afinish(status=Run.Status.PAUSED)


async def asucceed(writer: EventWriter, *, spec: GraphSpec, values: Any) -> Any:
    """The graph reached its end: the run's output is what its graph picks from the state."""
    output = to_jsonable(spec.output_of(values))
    writer.add({"kind": Kind.RUN_SUCCEEDED, "payload": {"output": output}})
    await writer.afinish(status=Run.Status.SUCCEEDED, output=output)
    return output


async def afail(writer: EventWriter, exc: BaseException) -> None:
    """A node raised (or the executor could not go on): the run fails with the error."""
    message = f"{type(exc).__name__}: {exc}"
    writer.add({"kind": Kind.RUN_FAILED, "payload": {"error": message}})
    await writer.afinish(status=Run.Status.FAILED, error=(message, traceback.format_exc()),
                         cancel_interrupts=True)


async def acancel(writer: EventWriter) -> None:
    """An operator cancelled the run: it stops at this node boundary (the event says who)."""
    by = await acancelled_by(writer.run.id)
    writer.add({"kind": Kind.RUN_CANCELLED, "payload": {"reason": "cancelled", "by": by}})
    await writer.afinish(status=Run.Status.CANCELLED, cancel_interrupts=True)
