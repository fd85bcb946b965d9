"""Models leaving the service: an ONNX graph from raw features to label and decision
(``onnx_graph``), a self-contained bundle (``bundle``: JSON + npy in a zip, loadable without the
service by ``load_bundle``), and the routes that export and import them (``routes``, ``service``).

``bundle``, ``expansion`` and ``onnx_graph`` import neither the web framework nor the database
layer, so a bundle can be used where only numpy/scipy/scikit-learn are installed."""
