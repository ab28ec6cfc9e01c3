"""Kafka topic ids: 16 bytes shown as URL-safe Base64 without padding.

Acceptance follows `org.apache.kafka.common.Uuid.fromString` (2.8.2, unchanged in 3.4.1):
at most 24 characters, decoded by Java's URL-safe Base64 decoder (so the padded 24-character
form is accepted too), and exactly 16 bytes. The all-zero id means "no id".
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass

from remediate.errors import FormatError

_UNPADDED = re.compile(r"[A-Za-z0-9_-]{22}")
_PADDED = re.compile(r"[A-Za-z0-9_-]{22}==")
ZERO_ID_TEXT = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass(frozen=True, order=True)
class TopicId:
    """A topic id as Kafka stores it: 16 raw bytes."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != 16:
            raise ValueError(f"a topic id is 16 bytes, not {len(self.raw)}")

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self.raw).decode("ascii").rstrip("=")

    @property
    def is_zero(self) -> bool:
        return self.raw == bytes(16)

    @classmethod
    def random(cls) -> TopicId:
        """A fresh id the way Kafka 3.x mints one: never zero, never 1, never starting with '-'."""
        while True:
            candidate = cls(secrets.token_bytes(16))
            if candidate.raw not in (bytes(16), bytes(15) + b"\x01") and not str(
                candidate
            ).startswith("-"):
                return candidate


ZERO_ID = TopicId(bytes(16))


def parse_topic_id(text: str, *, source: str, field: str = "topic_id") -> TopicId:
    """Parse an id exactly as Kafka's `Uuid.fromString` would, or raise FormatError.

    The zero id parses (Kafka accepts it here); callers that must refuse it check `is_zero`.
    """
    expected = "22 URL-safe Base64 characters (or 24 ending in '==')"
    if not isinstance(text, str):
        raise FormatError(source, field, expected, text)
    if not (_UNPADDED.fullmatch(text) or _PADDED.fullmatch(text)):
        raise FormatError(source, field, expected, text)
    try:
        raw = base64.urlsafe_b64decode(text[:22] + "==")
    except (
        binascii.Error,
        ValueError,
    ) as exc:  # pragma: no cover - the regex admits only valid text
        raise FormatError(source, field, expected, text) from exc
    return TopicId(raw)
