"""Webhooks: signed HTTP deliveries of alert and registry events (docs/monitoring.md)."""
