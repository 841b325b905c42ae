"""What a page, a websocket or the API shows of a run: its trace and timeline, the
waterfall of its nodes and model calls, its header, its questions in the inbox, its result
card and its export. Plain functions over selectors' rows; no requests, no responses."""
