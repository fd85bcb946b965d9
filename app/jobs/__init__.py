"""Background jobs: queued by the API, claimed and run by workers (app.jobs.worker)."""
