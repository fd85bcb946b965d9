"""Predictions and margin statistics with stored models."""
