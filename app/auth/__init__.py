"""API keys with scopes: ``Authorization: Bearer msv_...``.

``keys`` holds the secrets' arithmetic (generation, SHA-256, constant-time comparison, scopes),
``service`` the ``api_keys`` rows, ``gate`` the decision whether a request needs a key and whose
it is, ``security`` the FastAPI dependencies and the middleware, ``routes`` ``/keys`` and
``serving`` the check ``msvmav serve`` makes before it listens.
"""
