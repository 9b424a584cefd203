"""The application: ``create_app`` (the composition root that joins the core's ``/v1`` routes, the
authorization server, the MCP connector and the web pages into one ASGI app), ``serve``, the
``relaybox`` command, the structured logs and the metrics."""
