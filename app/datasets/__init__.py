"""Uploaded datasets: parsed by app.ingest, stored as a metadata row plus npy blobs."""
