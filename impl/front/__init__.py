"""The kernel an orchestrator holds: the request path and its context, effects, convergence, audit, principals, the client."""
