"""Kafka's admin API at its boundary: what kafka-python (or the network) raises for a request
that fails becomes KafkaAdminError, naming the request, the broker and what was said; a real
client that cannot reach any broker says so the same way."""

from __future__ import annotations

import logging

import pytest
from kafka.errors import (
    BrokerNotAvailableError,
    IncompatibleBrokerVersion,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
)

from remediate.errors import KafkaAdminError
from remediate.kafka_admin import DROPPED_WHILE_SECURING, KafkaPythonAdmin, asking, starting
from remediate.sandbox.plumbing.zkserver import free_port

ERRORS = (KafkaTimeoutError, BrokerNotAvailableError, IncompatibleBrokerVersion, OSError)


@pytest.mark.parametrize(
    ("raised", "broker", "message"),
    [
        (
            KafkaTimeoutError("Timed out waiting for future"),
            2,
            "DescribeConfigs to broker 2 failed: KafkaTimeoutError: Timed out waiting for future",
        ),
        (
            BrokerNotAvailableError(),
            None,
            "DescribeConfigs failed: [Error 8] BrokerNotAvailableError",
        ),
        (
            ConnectionRefusedError(111, "Connection refused"),
            3,
            "DescribeConfigs to broker 3 failed: ConnectionRefusedError: [Errno 111] Connection"
            " refused",
        ),
    ],
)
def test_a_failed_request_says_which_request_which_broker_and_what(
    raised: BaseException, broker: int | None, message: str
) -> None:
    with pytest.raises(KafkaAdminError) as caught, asking("DescribeConfigs", ERRORS, broker=broker):
        raise raised
    assert str(caught.value) == message
    assert (caught.value.request, caught.value.broker) == ("DescribeConfigs", broker)
    assert caught.value.__cause__ is raised


def test_an_error_it_was_not_told_of_crosses_unchanged() -> None:
    """A bug (a KeyError in the adapter, say) is not dressed as Kafka's refusal."""
    with pytest.raises(KeyError), asking("ApiVersions", ERRORS, broker=1):
        raise KeyError("broker")


def test_a_refused_login_is_kafkas_error_not_the_clients() -> None:
    with (
        pytest.raises(KafkaAdminError, match="SaslAuthenticationFailedError"),
        asking("ApiVersions", (SaslAuthenticationFailedError,), broker=1),
    ):
        raise SaslAuthenticationFailedError("Authentication failed: Invalid username or password")


def test_a_client_that_reaches_no_broker_cannot_start() -> None:
    nowhere = f"127.0.0.1:{free_port('127.0.0.1')}"
    with pytest.raises(KafkaAdminError) as caught:
        KafkaPythonAdmin([nowhere], timeout_ms=1_000)
    assert str(caught.value).startswith(
        f"the admin client's start (bootstrap {nowhere}) failed: KafkaTimeoutError: Unable to"
        f" bootstrap from ['{nowhere}']"
    ), caught.value


REFUSED = (
    "Bootstrap connection to bootstrap-0 failed: [Error 58] SaslAuthenticationFailedError:"
    " Authentication failed: Invalid username or password (backoff 0.06 secs)"
)
DROPPED = (
    "Bootstrap connection to bootstrap-1 failed: KafkaConnectionError: socket disconnected"
    " (backoff 0.12 secs)"
)
TIMED_OUT = (
    "Bootstrap connection to bootstrap-2 failed: [Error 7] RequestTimedOutError: Request timed"
    " out after 46 ms (backoff 0.68 secs)"
)


@pytest.mark.parametrize(
    ("logged", "secured", "added"),
    [
        pytest.param([REFUSED, DROPPED, TIMED_OUT], True, f" ({REFUSED})", id="the-refusal-wins"),
        pytest.param(
            [DROPPED, "Sending username and password in the clear", TIMED_OUT],
            True,
            f" ({TIMED_OUT}; {DROPPED_WHILE_SECURING})",
            id="only-drops-on-a-secured-listener",
        ),
        pytest.param([DROPPED], False, f" ({DROPPED})", id="only-drops-in-plaintext"),
        pytest.param(["Bootstrap bootstrap-0 not ready; waiting 0.06 secs"], True, "", id="none"),
    ],
)
def test_a_failed_start_says_the_most_telling_reason(
    logged: list[str], secured: bool, added: str
) -> None:
    """kafka-python's own timeout says only "Unable to bootstrap"; the reason of each failed
    attempt is in its warnings, and a refused login is read there (or, where the client read
    the broker's close before its answer, what a dropped secured connection most often means)."""
    log = logging.getLogger("kafka.net.manager")

    def bootstrap() -> None:
        with starting("the start", ERRORS, secured=secured):
            for line in logged:
                log.warning(line)
            raise KafkaTimeoutError("Unable to bootstrap from ['h:1']")

    with pytest.raises(KafkaAdminError) as caught:
        bootstrap()
    assert str(caught.value) == (
        "the start failed: KafkaTimeoutError: Unable to bootstrap from ['h:1']" + added
    )
