"""Training: POST /train (routes, schemas, service), the checks of algorithms and their
hyper-parameters, the pipeline around solver.protocol, and the train job's runner."""
