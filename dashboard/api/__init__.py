"""The REST API under ``/api/``: the same services and selectors as the pages, as JSON."""
