"""Run the console with uvicorn: load the users file, check that the binding is allowed, serve until
SIGINT/SIGTERM."""

from __future__ import annotations

import logging

from mq.config import DashboardConfig
from mq.dashboard.auth import check_binding, load_accounts

log = logging.getLogger(__name__)


def serve(config: DashboardConfig, namesrv_addrs: list[str]) -> None:
    """Serve the console in the foreground (ConfigError before anything listens when it may not start)."""
    import uvicorn

    from mq.dashboard.app import create_app

    accounts = load_accounts(config.users_file) if config.users_file else {}
    check_binding(config.host, accounts, config.login_required)
    app = create_app(config, namesrv_addrs, accounts)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.listen_port, log_level="warning",
                                           access_log=False, server_header=False, proxy_headers=False,
                                           lifespan="on"))
    server.run()
