"""Planwatch's Django project: settings from the environment, ASGI entry point, URLs."""
