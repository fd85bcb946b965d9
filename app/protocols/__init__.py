"""Protocols other tools already speak: the Open Inference Protocol (KServe V2, with Triton's
binary tensor data extension) under ``/v2``, and MLflow's scoring protocol at
``/models/{ref}/invocations``. Both resolve a model reference and predict through
``app.predict.service``, so their answers are /predict's."""
