"""Batch scoring jobs: POST /batch-predictions (app.batch.routes) queues a job that the
worker runs chunk by chunk (app.batch.runner)."""
