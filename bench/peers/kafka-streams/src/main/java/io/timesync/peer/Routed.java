package io.timesync.peer;

import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.processor.StreamPartitioner;

import java.util.Optional;
import java.util.Set;

/**
 * A record value together with the input partition it came from. A StreamPartitioner sees only
 * key and value, so the partition travels inside the value to the sink, which writes the plain
 * bytes to the output partition of the same index.
 */
record Routed(int partition, byte[] value) {

    /** Writes only the original value bytes (null stays null: tombstones pass through). */
    static final class ValueSerializer implements Serializer<Routed> {
        @Override
        public byte[] serialize(final String topic, final Routed data) {
            return data == null ? null : data.value();
        }
    }

    /** Task i (input partition i of every topic) → output partition i. */
    static final class ToInputPartition implements StreamPartitioner<byte[], Routed> {
        @Override
        public Optional<Set<Integer>> partitions(
            final String topic, final byte[] key, final Routed value, final int numPartitions) {
            return Optional.of(Set.of(value.partition()));
        }
    }
}
