"""Where the facts live: a task's record in the shape of its rows, the schema, the hash-chained ledger, and the backends (SQLite, PostgreSQL)."""
