from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat

# Called at once and on every change with the znode's data and stat (None, None while it does
# not exist); returning False stops the watch.
_DataFunc = Callable[[bytes | None, ZnodeStat | None], bool | None]
# Called at once and on every change with the znode's children; returning False stops it.
_ChildrenFunc = Callable[[list[str]], bool | None]

class DataWatch:
    def __init__(self, client: KazooClient, path: str, func: _DataFunc | None = None) -> None: ...
    def __call__(self, func: _DataFunc) -> _DataFunc: ...

class ChildrenWatch:
    def __init__(
        self,
        client: KazooClient,
        path: str,
        func: _ChildrenFunc | None = None,
        allow_session_lost: bool = True,
        send_event: bool = False,
    ) -> None: ...
    def __call__(self, func: _ChildrenFunc) -> _ChildrenFunc: ...
