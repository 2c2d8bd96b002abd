from typing import Any

class FetchedRecord:
    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any = (),
    ) -> None: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...

class PartitionReader:
    next_fetch_offset: int
    def __init__(
        self,
        tp: Any,
        batches: Any,
        aborted: Any,
        fetch_offset: int,
        check_crcs: bool,
        read_committed: bool,
        raw: bytes | None = None,
        max_batch_bytes: int = ...,
    ) -> None: ...
    def __iter__(self) -> PartitionReader: ...
    def __next__(self) -> FetchedRecord: ...
    def take(self, limit: int) -> list[FetchedRecord]: ...
    @property
    def exhausted(self) -> bool: ...
