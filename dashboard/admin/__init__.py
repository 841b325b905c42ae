"""The Django admin: a read-only audit of runs, events, interrupts and LangGraph checkpoints."""

from dashboard.admin.checkpoints import CheckpointAdmin
from dashboard.admin.langgraph import (
    AssistantAdmin,
    AssistantVersionAdmin,
    CronAdmin,
    StoreItemAdmin,
)
from dashboard.admin.runs import InterruptAdmin, NoticeAdmin, RunAdmin, RunEventAdmin

__all__ = [
    "AssistantAdmin",
    "AssistantVersionAdmin",
    "CheckpointAdmin",
    "CronAdmin",
    "InterruptAdmin",
    "NoticeAdmin",
    "RunAdmin",
    "RunEventAdmin",
    "StoreItemAdmin",
]
