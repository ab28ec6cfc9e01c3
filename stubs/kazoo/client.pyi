import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal, overload

from kazoo.exceptions import ZookeeperError
from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler
from kazoo.protocol.states import KazooState as KazooState
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.lock import Lock
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.security import ACL

# DataWatch and ChildrenWatch callbacks (kazoo/recipe/watchers.pyi says what they are told).
_DataFunc = Callable[[bytes | None, ZnodeStat | None], bool | None]
_ChildrenFunc = Callable[[list[str]], bool | None]
# A connection listener is told the new KazooState ("CONNECTED", "SUSPENDED", "LOST").
_Listener = Callable[[str], object]
# What a committed transaction gives for each operation, in order: the created path, the
# written znode's stat, True (check, delete), or the error that failed it (RolledBackError for
# an operation that was fine but did not run because another failed).
_TransactionResult = str | ZnodeStat | bool | ZookeeperError

class KazooClient:
    logger: logging.Logger
    handler: SequentialThreadingHandler
    hosts: Any
    chroot: str | None
    state: str
    default_acl: list[ACL] | None
    def __init__(
        self,
        hosts: str = "127.0.0.1:2181",
        timeout: float = 10.0,
        client_id: tuple[int, bytes] | None = None,
        handler: SequentialThreadingHandler | None = None,
        default_acl: Sequence[ACL] | None = None,
        auth_data: Sequence[tuple[str, str]] | None = None,
        sasl_options: dict[str, str] | None = None,
        read_only: bool | None = None,
        randomize_hosts: bool = True,
        connection_retry: Any = None,
        command_retry: Any = None,
        logger: logging.Logger | None = None,
        keyfile: str | None = None,
        keyfile_password: str | None = None,
        certfile: str | None = None,
        ca: str | None = None,
        use_ssl: bool = False,
        verify_certs: bool = True,
        check_hostname: bool = False,
        **kwargs: Any,
    ) -> None: ...
    @property
    def client_id(self) -> tuple[int, bytes] | None: ...
    @property
    def connected(self) -> bool: ...
    def add_listener(self, listener: _Listener) -> None: ...
    def remove_listener(self, listener: _Listener) -> None: ...
    # Private in kazoo: queue a request object (type, serialize(), deserialize()) on the
    # session; remediate/collect/multiread.py sends the multiRead kazoo has no call for.
    def _call(self, request: Any, async_object: AsyncResult[Any]) -> bool | None: ...
    def start(self, timeout: float = 15) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...
    @overload
    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: Literal[False] = False,
    ) -> str: ...
    @overload
    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        *,
        include_data: Literal[True],
    ) -> tuple[str, ZnodeStat]: ...
    def create_async(
        self,
        path: str,
        value: bytes = b"",
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> AsyncResult[str]: ...
    def ensure_path(self, path: str, acl: Sequence[ACL] | None = None) -> bool: ...
    def exists(self, path: str, watch: Callable[..., object] | None = None) -> ZnodeStat | None: ...
    def exists_async(
        self, path: str, watch: Callable[..., object] | None = None
    ) -> AsyncResult[ZnodeStat | None]: ...
    def get(
        self, path: str, watch: Callable[..., object] | None = None
    ) -> tuple[bytes, ZnodeStat]: ...
    def get_async(
        self, path: str, watch: Callable[..., object] | None = None
    ) -> AsyncResult[tuple[bytes, ZnodeStat]]: ...
    @overload
    def get_children(
        self,
        path: str,
        watch: Callable[..., object] | None = None,
        include_data: Literal[False] = False,
    ) -> list[str]: ...
    @overload
    def get_children(
        self, path: str, watch: Callable[..., object] | None = None, *, include_data: Literal[True]
    ) -> tuple[list[str], ZnodeStat]: ...
    def get_children_async(
        self, path: str, watch: Callable[..., object] | None = None
    ) -> AsyncResult[list[str]]: ...
    def get_acls(self, path: str) -> tuple[list[ACL], ZnodeStat]: ...
    def get_acls_async(self, path: str) -> AsyncResult[tuple[list[ACL], ZnodeStat]]: ...
    def set_acls(self, path: str, acls: Sequence[ACL], version: int = -1) -> ZnodeStat: ...
    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat: ...
    def set_async(self, path: str, value: bytes, version: int = -1) -> AsyncResult[ZnodeStat]: ...
    def transaction(self) -> TransactionRequest: ...
    # The recipes, bound to this client (partials of kazoo.recipe's classes in kazoo).
    def DataWatch(self, path: str, func: _DataFunc | None = None) -> DataWatch: ...
    def ChildrenWatch(
        self,
        path: str,
        func: _ChildrenFunc | None = None,
        allow_session_lost: bool = True,
        send_event: bool = False,
    ) -> ChildrenWatch: ...
    def Lock(self, path: str, identifier: str | None = None) -> Lock: ...
    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool: ...
    def delete_async(self, path: str, version: int = -1) -> AsyncResult[bool]: ...

class TransactionRequest:
    client: KazooClient
    committed: bool
    def __init__(self, client: KazooClient) -> None: ...
    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Sequence[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None: ...
    def delete(self, path: str, version: int = -1) -> None: ...
    def set_data(self, path: str, value: bytes, version: int = -1) -> None: ...
    def check(self, path: str, version: int) -> None: ...
    def commit_async(self) -> AsyncResult[list[_TransactionResult]]: ...
    def commit(self) -> list[_TransactionResult]: ...
