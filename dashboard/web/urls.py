"""Dashboard pages."""

from __future__ import annotations

from django.urls import path

from dashboard.web.views import crons, debug, history, interrupts, notices, runs, trace

app_name = "dashboard"

urlpatterns = [
    path("", runs.run_list, name="runs"),
    path("runs/new/", runs.run_new, name="run_new"),
    path("runs/<uuid:run_id>/", trace.run_detail, name="run_detail"),
    path("runs/<uuid:run_id>/events/<int:seq>/", trace.run_event, name="run_event"),
    path("runs/<uuid:run_id>/tasks/<str:task_id>/", trace.run_task, name="run_task"),
    path("runs/<uuid:run_id>/state/", trace.run_state, name="run_state"),
    path("runs/<uuid:run_id>/cancel/", trace.run_cancel, name="run_cancel"),
    path("runs/<uuid:run_id>/budget/", trace.run_budget, name="run_budget"),
    path("runs/<uuid:run_id>/interrupts/", interrupts.run_interrupts, name="run_interrupts"),
    path("runs/<uuid:run_id>/debug/", debug.run_debug, name="run_debug"),
    path("runs/<uuid:run_id>/breakpoints/", debug.run_breakpoints, name="run_breakpoints"),
    path("runs/<uuid:run_id>/continue/", debug.run_continue, name="run_continue"),
    path("runs/<uuid:run_id>/fork/", debug.run_fork, name="run_fork"),
    path("runs/<uuid:run_id>/state/edit/", debug.run_state_edit, name="run_state_edit"),
    path("runs/<uuid:run_id>/compare/<uuid:other_id>/", debug.run_compare, name="run_compare"),
    path("runs/compare/", debug.runs_compare, name="runs_compare"),
    path("inbox/", interrupts.inbox, name="inbox"),
    path("inbox/answer/", interrupts.inbox_answer, name="inbox_answer"),
    path("inbox/history/", history.history, name="history"),
    path("inbox/notice/<str:token>/", notices.notice_link, name="notice_link"),
    path("inbox/history.csv", history.history_csv, name="history_csv"),
    path("inbox/questions/<int:interrupt_pk>/take/", interrupts.interrupt_take,
         name="interrupt_take"),
    path("inbox/questions/<int:interrupt_pk>/assign/", interrupts.interrupt_assign,
         name="interrupt_assign"),
    path("crons/", crons.cron_list, name="crons"),
]
