"""The fingerprint's JSON: "broker:path" keys outside, FileKey inside, the same JSON back."""

from __future__ import annotations

import json

import pytest

from remediate.plan import FileKey, Fingerprint

DOCUMENT = {
    "cluster_id": "cid",
    "brokers": [1, 2, 10],
    "controller_epoch": 3,
    "topics": {"orders": 4, "pay": 0},
    "files": {
        "10:/data/kafka/orders-0/partition.metadata": "AAAAAAAAAAAAAAAAAAAAAQ",
        "2:/data/kafka/orders-0/partition.metadata": None,
    },
}


def test_the_json_comes_back_exactly() -> None:
    fingerprint = Fingerprint.from_json(DOCUMENT)
    assert fingerprint.files[FileKey(2, "/data/kafka/orders-0/partition.metadata")] is None
    assert fingerprint.file_brokers() == [2, 10]
    assert json.dumps(fingerprint.to_json()) == json.dumps(DOCUMENT)


def test_a_metadata_key_is_built_from_the_log_dir_topic_and_partition() -> None:
    key = FileKey.metadata(3, "/data/3/kafka/", "orders", 1)
    assert key == FileKey(3, "/data/3/kafka/orders-1/partition.metadata")
    assert str(key) == "3:/data/3/kafka/orders-1/partition.metadata"
    assert FileKey.parse(str(key)) == key


@pytest.mark.parametrize("text", ["", "3", "3:", "x:/data", ":/data"])
def test_a_malformed_key_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        FileKey.parse(text)
