"""Pages: one module per area (runs, trace, interrupts); each parses, calls, renders."""
