"""Monitoring: the prediction log, feedback and the monitoring report."""
