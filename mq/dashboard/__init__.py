"""``mq dashboard``: the operators' web console, one more layer over ``mq.client`` (like ``mq.cli``).

Starlette serves Jinja2 pages; htmx (vendored under ``static/vendor``) refreshes live figures and posts the
actions; uPlot draws the lag chart. Every view reads the cluster through ``mq.client`` (``MQAdmin`` and the
operations in ``mq.client.group_admin``, ``topic_admin``, ``dead_letters``, ``message_window``,
``message_view``, ``broker_runtime`` and ``mq.trace.query``), so it works against mq and RocketMQ 4.x alike.

Modules: ``app.py`` builds the application; ``backend.py`` holds the connections to the cluster;
``auth.py`` the accounts, sessions, login and CSRF checks; ``views/`` one module per area; ``server.py`` runs it
with uvicorn after checking that the binding is allowed.
"""
