from typing import Any, TypeVar

from kazoo.handlers import utils

_T = TypeVar("_T")

class KazooTimeoutError(Exception): ...
class AsyncResult(utils.AsyncResult[_T]): ...

class SequentialThreadingHandler:
    name: str
    timeout_exception: type[KazooTimeoutError]
    def async_result(self) -> AsyncResult[Any]: ...
