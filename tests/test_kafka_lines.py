"""Each release line's rules and how a cluster's lines are read, on plain data."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediate.kafka_lines import LINES, KafkaLines, parse_line

CASES = [
    # line, lenient first LeaderAndIsr, Offline marking, consumers down at failover, moves
    ((2, 8), True, False, False, True),
    ((3, 0), False, True, False, False),
    ((3, 1), False, False, True, False),
    ((3, 4), False, False, True, False),
    ((3, 9), False, False, True, False),
]


@pytest.mark.parametrize(("line", "lenient", "offline", "consumers", "moves"), CASES)
def test_each_line_has_its_own_rules(
    line: tuple[int, int], lenient: bool, offline: bool, consumers: bool, moves: bool
) -> None:
    lines = KafkaLines.uniform(line, [1])
    assert lines.lenient_first_leader_and_isr(1) is lenient
    assert lines.marks_offline(1) is offline
    assert lines.consumers_fail_at_failover(1) is consumers
    assert lines.moves_clear_ids([1]) is moves


def test_a_broker_not_known_is_taken_at_its_strictest_and_refuses_the_plan() -> None:
    lines = KafkaLines.read({1: (2, 8), 2: "ApiVersions failed: timeout"})
    assert not lines.lenient_first_leader_and_isr(2)
    assert lines.marks_offline(2) and lines.consumers_fail_at_failover(2)
    assert not lines.moves_clear_ids([1, 2])
    assert lines.refusal([1]) is None
    assert lines.refusal([1, 2]) == (
        "the Kafka release of broker(s) 2 is not known or not supported, and the rules of a"
        " repair differ between releases (broker 2: ApiVersions failed: timeout)"
    )


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ((2, 7), "runs Kafka 2.7, which has no topic ids"),
        ((4, 0), "runs Kafka 4.0, not a ZooKeeper-mode release the tool has rules for (2.8 to"),
    ],
)
def test_a_release_outside_2_8_to_3_9_is_not_supported_and_says_why(
    line: tuple[int, int], why: str
) -> None:
    lines = KafkaLines.read({1: line})
    assert lines.lines == {}
    assert lines.unknown[1].startswith(why)
    assert "broker 1: " + why in (lines.refusal([1]) or "")


def test_a_mixed_cluster_names_each_line_with_its_brokers() -> None:
    lines = KafkaLines.read({3: (3, 9), 1: (2, 8), 2: (3, 9), 4: "down"})
    assert lines.summary() == (
        "Kafka 2.8 on broker(s) 1; Kafka 3.9 on broker(s) 2, 3; not known on broker(s) 4"
    )
    assert not lines.moves_clear_ids([1, 2])


@given(
    st.dictionaries(
        st.integers(0, 10_000),
        st.one_of(
            st.sampled_from(LINES),
            st.tuples(st.integers(0, 9), st.integers(0, 20)),
            st.text(max_size=40),
        ),
    )
)
def test_lines_read_back_from_their_json(answers: dict[int, tuple[int, int] | str]) -> None:
    lines = KafkaLines.read(answers)
    assert KafkaLines.from_json(lines.to_json()) == lines
    assert set(lines.lines) | set(lines.unknown) == set(answers)


@pytest.mark.parametrize("text", ["3", "3.x", "", "three.nine", "3.9.2"])
def test_a_line_that_is_not_major_dot_minor_is_refused_with_what_was_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR"):
        parse_line(text)
