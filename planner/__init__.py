"""Pure LangGraph planner graphs hosted by Planwatch; nothing here imports Django."""
