"""The service's infrastructure: configuration, database, problems, middleware, metrics, logging,
pagination, ids, idempotency, array storage. No domain package is imported from here (only the
parsers of app.ingest, below it; see docs/architecture.md)."""
