"""Planwatch's Django app: runs, their event log, interrupts, pages, API and admin."""
