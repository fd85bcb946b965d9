"""The serving room: below the doors (/predict, /predict/file, batch, /v2, invocations) and
monitoring, above the models and the registry. One frozen served model
(``app.serving.model.ServedModel``), acquired one way (``app.serving.acquire.acquire``), scored,
explained and evaluated by one core (``scoring``, ``explaining``, ``evaluating``); the doors are
codecs into it and out of it (docs/architecture.md)."""
