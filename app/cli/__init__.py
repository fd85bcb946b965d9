"""The msvmav command line: serve, worker, keys, experiment."""
