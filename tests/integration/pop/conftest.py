"""The admin CLI fixtures of tests/integration/broker (``mq``, ``mq_at``) for the pop tests."""

from tests.integration.broker.conftest import mq, mq_at  # noqa: F401  (fixtures)
