"""The field-acquisition planner of seeds 000/001 (being built)."""
