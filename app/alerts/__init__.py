"""Alert rules on the monitoring report, evaluated on every window in the background and
delivered to webhooks; their gauges on /metrics (docs/monitoring.md)."""
