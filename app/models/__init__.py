"""Trained models: metadata row + npy blobs of ``estimator.to_dict()``; never pickle."""
