"""Alembic migration environment for the msvmav service (revisions in ``versions/``)."""
