"""The one verdict of the fetch path: offsets of a partition whose records cannot be read.

A fetched batch can be unreadable in many ways — a CRC that does not match, lengths or counts
that lie, a codec that fails or inflates past its bound, a header key aiokafka's own decoder
refuses (it decodes them as strict UTF-8; the broker does not check them). Whatever the cause,
the reader (:mod:`sidecar.kafka._fetched`, or the guard over aiokafka's reader in
:mod:`sidecar.kafka.fetch_hook`) turns it into one :class:`UnreadableRecords`: which partition,
which offsets (from the first the consumer had not read to the end of the failing batch), why,
and where reading can resume. It is a ``CorruptRecordException`` — Kafka's name for exactly this —
and it never escapes ``getmany``: the hook hands it over *in place of* that partition's records,
and :mod:`sidecar.service.fetch` puts it through the failure policy like any bad record
(``errors.tolerance=all``: a trace in the dead letter queue, or dropped under
``timestamp.invalid=skip``; ``none``: the sidecar stops, naming the offsets).

Why a whole range and not one record: once a batch's bytes lie, the records after the lie cannot
be told apart, and a batch is what Kafka's own consumer gives up on too. The range ends at the
batch's last offset as its header says; when that header cannot be trusted to move forward, the
range is the one offset the consumer stands at, so that reading always moves on.
"""

from __future__ import annotations

from aiokafka.errors import CorruptRecordException, KafkaError

#: The most of a batch's bytes the trace of an unreadable range carries as its value: the
#: sidecar's producers and the topics it creates take 8 MiB (``sidecar.output.writer``); the
#: rest of that is room for the headers.
MAX_KEPT_BYTES = 4 * 1024 * 1024


class UnreadableRecords(CorruptRecordException):  # type: ignore[misc]  # aiokafka ships no types
    """Offsets ``first_offset`` … ``next_offset - 1`` of ``topic[partition]`` cannot be read.

    ``reason`` says what failed (one line); ``data`` is the failing batch as fetched, when it was
    known and at most :data:`MAX_KEPT_BYTES` (the dead letter carries it, so that nothing is lost
    that could be recovered by hand). Reading resumes at ``next_offset``.
    """

    retriable = False

    def __init__(
        self,
        topic: str,
        partition: int,
        first_offset: int,
        next_offset: int,
        reason: str,
        data: bytes | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.first_offset = first_offset
        self.next_offset = max(next_offset, first_offset + 1)
        self.reason = reason
        self.data = data if data is None or len(data) <= MAX_KEPT_BYTES else None
        super().__init__(str(self))

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @property
    def offsets(self) -> str:
        """``"7"`` or ``"7-12"``: the offsets, as a line names them."""
        last = self.last_offset
        return f"{self.first_offset}" if last == self.first_offset else f"{self.first_offset}-{last}"

    def __str__(self) -> str:
        noun = "offset" if self.last_offset == self.first_offset else "offsets"
        return f"cannot read {self.topic}[{self.partition}] at {noun} {self.offsets}: {self.reason}"

    def __reduce__(self) -> tuple[object, ...]:
        return (
            type(self),
            (self.topic, self.partition, self.first_offset, self.next_offset, self.reason, self.data),
        )


class ReaderFailed(CorruptRecordException):  # type: ignore[misc]
    """A fetched batch failed in a reader that cannot say which offsets: aiokafka's own, when
    :mod:`sidecar.kafka.fetch_hook` could not install itself (an aiokafka it does not fit)."""

    retriable = False

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(str(self))

    def __str__(self) -> str:
        return (
            f"cannot read a fetched batch ({describe_cause(self.cause)}); aiokafka's reader, unhooked, "
            "does not say which offsets"
        )


def describe_cause(error: BaseException) -> str:
    """What a reader error says, with its type's name (a codec's messages often lack it)."""
    decorated = isinstance(error, KafkaError) and error.args and isinstance(error.args[0], str)
    said = error.args[0] if decorated else str(error)  # aiokafka's str() adds "[Error N] Name: "
    text = said.strip().splitlines()[0] if said.strip() else ""
    name = type(error).__name__
    if not text:
        return name
    if isinstance(error, CorruptRecordException) or name in text:
        return text  # Kafka's and the reader's own messages say what they are
    return f"{name}: {text}"
