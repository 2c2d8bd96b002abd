package io.timesync.peer;

import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Pass-through processor: forwards each record in the order the task's PartitionGroup chose,
 * unchanged except for the three source headers, and tags the value with its input partition so
 * the sink can write task i's records to output partition i.
 */
final class SourceStamper implements Processor<byte[], byte[], byte[], Routed> {

    /** Records forwarded by every instance of this JVM (the warm-up drain waits on it). */
    static final AtomicLong FORWARDED = new AtomicLong();

    private ProcessorContext<byte[], Routed> context;

    @Override
    public void init(final ProcessorContext<byte[], Routed> context) {
        this.context = context;
    }

    @Override
    public void process(final Record<byte[], byte[]> record) {
        final RecordMetadata source = context.recordMetadata()
            .orElseThrow(() -> new IllegalStateException("a source record without topic/partition/offset metadata"));
        // A copy: the input record's headers belong to the consumer record.
        final Headers headers = new RecordHeaders(record.headers().toArray());
        headers.remove(MergePeer.HEADER_TOPIC);
        headers.remove(MergePeer.HEADER_PARTITION);
        headers.remove(MergePeer.HEADER_OFFSET);
        headers.add(MergePeer.HEADER_TOPIC, source.topic().getBytes(StandardCharsets.UTF_8));
        headers.add(MergePeer.HEADER_PARTITION, ascii(source.partition()));
        headers.add(MergePeer.HEADER_OFFSET, ascii(source.offset()));
        context.forward(new Record<>(
            record.key(), new Routed(source.partition(), record.value()), record.timestamp(), headers));
        FORWARDED.incrementAndGet();
    }

    private static byte[] ascii(final long n) {
        return Long.toString(n).getBytes(StandardCharsets.US_ASCII);
    }
}
