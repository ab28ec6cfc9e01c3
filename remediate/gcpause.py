"""Pausing Python's cyclic garbage collector around bulk, allocation-heavy work.

Parsing an inventory or collecting Spark rows creates millions of small objects and no cycles;
the collector's repeated passes over them cost a fifth of a large collect. It is paused for
such bounded sections and runs once at their end.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
