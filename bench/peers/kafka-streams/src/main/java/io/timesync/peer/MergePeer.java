package io.timesync.peer;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

/**
 * The Kafka Streams peer of the timesync benchmark: Kafka Streams merging the same co-partitioned
 * inputs that timesync merges, with its own {@code PartitionGroup} (KIP-353 / KIP-695 idling).
 *
 * <h2>What it does</h2>
 * One source node reads every input topic, so Kafka Streams forms one task per partition index
 * {@code i}, owning partition {@code i} of every input topic. Each task's PartitionGroup picks the
 * buffered head record with the smallest timestamp, subject to {@code max.task.idle.ms}. A
 * pass-through processor stamps the source coordinates ({@code timesync.source.topic},
 * {@code timesync.source.partition}, {@code timesync.source.offset}, ASCII decimal, the header
 * names timesync uses) and the sink writes task {@code i}'s records to output partition {@code i},
 * in the order the task processed them. Key, value, input headers and record timestamp are kept.
 * The harness can therefore compare Kafka Streams' order with timesync's record by record.
 *
 * <h2>What Kafka Streams cannot do that timesync can</h2>
 * <ul>
 *   <li><b>Order only within a task.</b> Kafka Streams orders partition {@code i} across
 *       co-partitioned topics; it never produces one global order across all partitions of a
 *       topic. timesync's {@code task.grouping=single} merges every input partition into one
 *       ordered output partition.</li>
 *   <li><b>No tie-break for equal timestamps.</b> The PartitionGroup keeps its non-empty queues in
 *       a {@code java.util.PriorityQueue} compared by head-record timestamp alone; which of two
 *       partitions with the same head timestamp goes first depends on the heap's history, so a
 *       replay may order ties differently. timesync breaks ties by (position of the topic in
 *       {@code input.topics}, partition, offset): its order is total and replays repeat it.</li>
 *   <li><b>No "wait forever" value.</b> The idle deadline is computed as
 *       {@code wallClockTime + max.task.idle.ms}; {@code Long.MAX_VALUE} overflows to a negative
 *       deadline, so the task processes at once (enforced) as with {@code 0}. This peer therefore
 *       maps {@code --max-task-idle-ms max} to {@value #WAIT_FOREVER_MS} ms (~146 million years),
 *       which does wait; a number is passed to Kafka Streams unchanged.</li>
 *   <li>No watermark or heartbeat output, no late / enforced marking on records (only the
 *       {@code enforced-processing} metric).</li>
 * </ul>
 *
 * <h2>Process contract (what bench/peers/kafka_streams.py relies on)</h2>
 * Prints exactly one line {@code READY} on stdout once the instance first reaches RUNNING; logs
 * go to stderr at WARN. SIGTERM or SIGINT closes the KafkaStreams instance (committing what was
 * processed) and exits 0; exit 1 on a runtime failure, exit 2 with one line on stderr for a usage
 * or topic error.
 */
public final class MergePeer {

    /** Header names shared with timesync's output (DESIGN: "Output record"). */
    static final String HEADER_TOPIC = "timesync.source.topic";
    static final String HEADER_PARTITION = "timesync.source.partition";
    static final String HEADER_OFFSET = "timesync.source.offset";

    /** Long.MAX_VALUE / 2: large enough never to expire, small enough not to overflow now + idle. */
    static final long WAIT_FOREVER_MS = 4611686018427387903L;

    private static final Duration ADMIN_TIMEOUT = Duration.ofSeconds(30);
    /** A warm-up drain that has not forwarded its records by then is given up (exit 1). */
    private static final Duration WARMUP_TIMEOUT = Duration.ofMinutes(5);

    private MergePeer() {
    }

    public static void main(final String[] args) {
        final PeerOptions options;
        try {
            options = PeerOptions.parse(args);
        } catch (final PeerOptions.HelpRequested help) {
            System.out.print(PeerOptions.USAGE);
            System.exit(0);
            return;
        } catch (final PeerOptions.UsageException e) {
            System.err.println("error: " + e.getMessage() + " (run with --help for usage)");
            System.exit(2);
            return;
        }
        System.exit(run(options));
    }

    static int run(final PeerOptions options) {
        if (options.warmsUp()) {
            final int code = warmUp(options.forWarmup(), options.warmupRecords());
            if (code != 0) {
                return code;
            }
        }
        final int partitions;
        try {
            partitions = prepareTopics(options);
        } catch (final PeerOptions.UsageException e) {
            System.err.println("error: " + e.getMessage());
            return 2;
        }

        final Path stateDir;
        try {
            stateDir = Files.createTempDirectory("timesync-ks-peer-");
        } catch (final IOException e) {
            System.err.println("error: cannot create a state directory: " + e);
            return 1;
        }

        final KafkaStreams streams = new KafkaStreams(topology(options), properties(options, stateDir));
        final CountDownLatch stop = new CountDownLatch(1);
        final AtomicBoolean ready = new AtomicBoolean(false);
        final AtomicReference<Throwable> failure = new AtomicReference<>();

        streams.setStateListener((newState, oldState) -> {
            if (newState == KafkaStreams.State.RUNNING && ready.compareAndSet(false, true)) {
                System.out.println("READY");
                System.out.flush();
            } else if (newState == KafkaStreams.State.ERROR || newState == KafkaStreams.State.PENDING_ERROR) {
                stop.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            failure.compareAndSet(null, exception);
            System.err.println("error: Kafka Streams failed: " + rootMessage(exception));
            stop.countDown();
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        final AtomicBoolean closed = new AtomicBoolean(false);
        final Runnable requestStop = stop::countDown;
        Signals.onTermination(requestStop);
        // Other ways the JVM can end (SIGHUP, System.exit elsewhere) still close the instance.
        final Thread hook = new Thread(() -> {
            if (closed.compareAndSet(false, true)) {
                streams.close(options.closeTimeout());
            }
        }, "peer-shutdown-hook");
        Runtime.getRuntime().addShutdownHook(hook);

        streams.start();
        try {
            stop.await();
        } catch (final InterruptedException e) {
            Thread.currentThread().interrupt();
        }

        boolean clean = true;
        if (closed.compareAndSet(false, true)) {
            clean = streams.close(options.closeTimeout());
            if (!clean) {
                System.err.println("error: Kafka Streams did not close within " + options.closeTimeout().toMillis() + " ms");
            }
        }
        deleteQuietly(stateDir);
        if (failure.get() != null || streams.state() == KafkaStreams.State.ERROR) {
            return 1;
        }
        return clean ? 0 : 1;
    }

    /**
     * The warm-up drain: the same topology and settings on other topics, in this JVM, until
     * {@code records} went through, then closed. The JIT-compiled code stays, so the measured
     * instance starts at the speed a long-running application has (a fresh JVM needs seconds of
     * work to get there, which would otherwise be in the benchmark's figure).
     */
    static int warmUp(final PeerOptions warm, final long records) {
        try {
            prepareTopics(warm);
        } catch (final PeerOptions.UsageException e) {
            System.err.println("error: warm-up: " + e.getMessage());
            return 2;
        }
        final Path stateDir;
        try {
            stateDir = Files.createTempDirectory("timesync-ks-peer-warmup-");
        } catch (final IOException e) {
            System.err.println("error: cannot create a state directory: " + e);
            return 1;
        }
        final long start = SourceStamper.FORWARDED.get();
        final long deadline = System.nanoTime() + WARMUP_TIMEOUT.toNanos();
        final KafkaStreams streams = new KafkaStreams(topology(warm), properties(warm, stateDir));
        streams.start();
        try {
            while (SourceStamper.FORWARDED.get() - start < records) {
                if (System.nanoTime() > deadline || streams.state() == KafkaStreams.State.ERROR) {
                    System.err.println("error: the warm-up drain forwarded " + (SourceStamper.FORWARDED.get() - start)
                        + " of " + records + " records within " + WARMUP_TIMEOUT.toSeconds() + " s");
                    streams.close(warm.closeTimeout());
                    return 1;
                }
                Thread.sleep(20);
            }
        } catch (final InterruptedException e) {
            Thread.currentThread().interrupt();
            streams.close(warm.closeTimeout());
            return 1;
        }
        streams.close(warm.closeTimeout());
        deleteQuietly(stateDir);
        return 0;
    }

    /** Source over every input topic → source-header stamper → sink routing task i to partition i. */
    static Topology topology(final PeerOptions options) {
        final Topology topology = new Topology();
        topology.addSource(
            "inputs",
            new ByteArrayDeserializer(),
            new ByteArrayDeserializer(),
            options.inputTopics().toArray(new String[0]));
        topology.addProcessor("stamp-source", SourceStamper::new, "inputs");
        topology.addSink(
            "output",
            options.outputTopic(),
            new ByteArraySerializer(),
            new Routed.ValueSerializer(),
            new Routed.ToInputPartition(),
            "stamp-source");
        return topology;
    }

    static Properties properties(final PeerOptions options, final Path stateDir) {
        final Map<String, Object> config = new TreeMap<>();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, options.applicationId());
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrapServers());
        config.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG, options.maxTaskIdleMs());
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, options.processingGuarantee());
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, options.commitIntervalMs());
        config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, options.numStreamThreads());
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        config.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        // Kafka Streams raises the producer's linger.ms to 100 by default: far too much latency for
        // a merge measured on loopback. 5 ms matches the benchmark's own producers.
        config.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 5);
        config.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // No global stores here; this (already deprecated) switch only silences a start-up warning.
        config.put("processing.exception.handler.global.enabled", true);
        config.putAll(options.extraConfig());
        final Properties props = new Properties();
        props.putAll(config);
        return props;
    }

    /**
     * Check that the inputs exist and are co-partitioned; create the output topic with as many
     * partitions when it is missing. Returns the partition count of the inputs.
     */
    static int prepareTopics(final PeerOptions options) throws PeerOptions.UsageException {
        final Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.bootstrapServers());
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) ADMIN_TIMEOUT.toMillis());
        for (final Map.Entry<String, String> e : options.extraConfig().entrySet()) {
            if (AdminClientConfig.configNames().contains(e.getKey())) {
                adminProps.put(e.getKey(), e.getValue());
            }
        }
        try (Admin admin = Admin.create(adminProps)) {
            final Map<String, Integer> counts = new TreeMap<>();
            for (final String topic : options.inputTopics()) {
                counts.put(topic, partitionCount(admin, topic).orElseThrow(() -> new PeerOptions.UsageException(
                    "input topic '" + topic + "' does not exist on " + options.bootstrapServers())));
            }
            final int partitions = counts.values().iterator().next();
            if (counts.values().stream().anyMatch(n -> n != partitions)) {
                throw new PeerOptions.UsageException(
                    "input topics are not co-partitioned (partition counts " + counts
                        + "): Kafka Streams merges partition i of every input in task i, so give them equal counts");
            }
            final Optional<Integer> output = partitionCount(admin, options.outputTopic());
            if (output.isEmpty()) {
                try {
                    admin.createTopics(List.of(new NewTopic(options.outputTopic(), Optional.of(partitions), Optional.empty())))
                        .all().get(ADMIN_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                } catch (final ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) {
                        throw new PeerOptions.UsageException(
                            "cannot create output topic '" + options.outputTopic() + "': " + rootMessage(e));
                    }
                }
            } else if (output.get() < partitions) {
                throw new PeerOptions.UsageException(
                    "output topic '" + options.outputTopic() + "' has " + output.get() + " partitions but the inputs have "
                        + partitions + ": task i writes to output partition i, so it needs at least " + partitions);
            }
            return partitions;
        } catch (final InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PeerOptions.UsageException("interrupted while checking topics");
        } catch (final TimeoutException e) {
            throw new PeerOptions.UsageException(
                "no answer from " + options.bootstrapServers() + " within " + ADMIN_TIMEOUT.toSeconds() + " s");
        }
    }

    private static Optional<Integer> partitionCount(final Admin admin, final String topic)
        throws InterruptedException, TimeoutException, PeerOptions.UsageException {
        try {
            final TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(ADMIN_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).get(topic);
            return Optional.of(description.partitions().size());
        } catch (final ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                return Optional.empty();
            }
            throw new PeerOptions.UsageException("cannot describe topic '" + topic + "': " + rootMessage(e));
        }
    }

    static String rootMessage(final Throwable error) {
        Throwable t = error;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage());
    }

    private static void deleteQuietly(final Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (final IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        } catch (final IOException | UncheckedIOException e) {
            System.err.println("warning: could not remove state directory " + dir + ": " + e.getMessage());
        }
    }
}
