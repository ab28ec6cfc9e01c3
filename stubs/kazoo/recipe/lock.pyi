from collections.abc import Sequence
from types import TracebackType

from kazoo.client import KazooClient

class Lock:
    client: KazooClient
    path: str
    node: str | None
    is_acquired: bool
    def __init__(
        self,
        client: KazooClient,
        path: str,
        identifier: str | None = None,
        extra_lock_patterns: Sequence[str] = (),
    ) -> None: ...
    def cancel(self) -> None: ...
    def acquire(
        self, blocking: bool = True, timeout: float | None = None, ephemeral: bool = True
    ) -> bool: ...
    def release(self) -> bool: ...
    def contenders(self) -> list[str]: ...
    def __enter__(self) -> None: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...
