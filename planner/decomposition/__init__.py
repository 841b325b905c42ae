"""The recursive task-decomposition planner of seeds 002/003/004 (being built)."""
