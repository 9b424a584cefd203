"""relaybox in a browser: the landing page, the readable API docs and the installable web app.

It imports only Starlette and the standard library (``tests/test_import_rules.py``): the pages
talk to the core through the same ``/v1`` routes any device uses. ``app.assembly.create_app``
mounts ``webapp.routes.web_routes()``.
"""
