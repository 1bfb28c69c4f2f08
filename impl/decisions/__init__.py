"""The decision for each request kind, the planner and the projections a reader sees."""
