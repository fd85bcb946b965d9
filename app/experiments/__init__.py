"""Experiments: the paper's protocol (solver.experiments) run as a background job."""
