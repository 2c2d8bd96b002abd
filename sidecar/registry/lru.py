"""A bounded map for the registry's caches: least recently used entries go first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """A map that forgets its least recently used entries beyond ``capacity`` entries or
    ``max_weight`` in total (each entry weighs what ``weigh`` says). Hand-written in a dozen
    lines (``cachetools`` would do, but is not a dependency of the sidecar)."""

    def __init__(self, capacity: int, max_weight: int, weigh: Callable[[V], int]) -> None:
        self.capacity, self.max_weight, self.weigh = capacity, max_weight, weigh
        self._entries: OrderedDict[K, V] = OrderedDict()
        self.weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self.pop(key)
        self._entries[key] = value
        self.weight += self.weigh(value)
        while len(self._entries) > self.capacity or (
            self.weight > self.max_weight and len(self._entries) > 1
        ):
            _, old = self._entries.popitem(last=False)
            self.weight -= self.weigh(old)

    def pop(self, key: K) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.weight -= self.weigh(old)
