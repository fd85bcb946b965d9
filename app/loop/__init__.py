"""Closing the loop (issue 48): retraining jobs on a registered model's training rows and its
fed-back logged rows, warm-started; and per-model policies that retrain, judge the challenger
against production on the same live rows, promote and roll back, every move in the alias
history with its reason and evidence."""
