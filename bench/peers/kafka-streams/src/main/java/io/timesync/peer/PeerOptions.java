package io.timesync.peer;

import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The command line of the peer, parsed and validated; errors name the option and the value. */
record PeerOptions(
    String bootstrapServers,
    List<String> inputTopics,
    String outputTopic,
    String applicationId,
    long maxTaskIdleMs,
    String processingGuarantee,
    long commitIntervalMs,
    int numStreamThreads,
    Duration closeTimeout,
    Map<String, String> extraConfig,
    List<String> warmupTopics,
    long warmupRecords) {

    static final String USAGE = String.join("\n",
        "usage: java -jar timesync-kafka-streams-peer.jar --bootstrap-servers HOST:PORT",
        "           --input-topics A,B[,...] --output-topic OUT --application-id ID",
        "           --max-task-idle-ms N|max [--processing-guarantee at_least_once|exactly_once_v2]",
        "           [--commit-interval-ms 100] [--num-stream-threads 1] [--close-timeout-ms 30000]",
        "           [--config KEY=VALUE ...] [--warmup-topics W1,W2 --warmup-records N]",
        "",
        "Merges partition i of every input topic in timestamp order (Kafka Streams' PartitionGroup)",
        "and writes that order to partition i of OUT, with timesync.source.{topic,partition,offset}",
        "headers. 'max' waits forever (" + MergePeer.WAIT_FOREVER_MS + " ms; Long.MAX_VALUE overflows",
        "in Kafka Streams' idle deadline and would act like 0). --config passes any Kafka Streams,",
        "consumer. or producer. setting. Prints READY on stdout once running; SIGTERM stops it.",
        "--warmup-topics: first drain N records of W1,W2 (same settings, into OUT-warmup) in the same",
        "JVM, so the measured run starts with a warm JIT; READY comes after that.",
        "");

    private static final Set<String> GUARANTEES = Set.of("at_least_once", "exactly_once_v2");

    /** A bad command line; the message says which option, which value, and what is allowed. */
    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(final String message) {
            super(message);
        }
    }

    /** --help / -h was given. */
    static final class HelpRequested extends Exception {
        private static final long serialVersionUID = 1L;
    }

    static PeerOptions parse(final String[] args) throws UsageException, HelpRequested {
        final Map<String, String> values = new LinkedHashMap<>();
        final Map<String, String> extra = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            String name = args[i];
            if (name.equals("--help") || name.equals("-h")) {
                throw new HelpRequested();
            }
            if (!name.startsWith("--")) {
                throw new UsageException("unexpected argument '" + name + "'");
            }
            String value;
            final int eq = name.indexOf('=');
            if (eq > 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new UsageException(name + " needs a value");
            }
            if (name.equals("--config")) {
                final int sep = value.indexOf('=');
                if (sep <= 0) {
                    throw new UsageException("--config needs KEY=VALUE, got '" + value + "'");
                }
                extra.put(value.substring(0, sep), value.substring(sep + 1));
            } else {
                values.put(name, value);
            }
        }
        final List<String> known = List.of(
            "--bootstrap-servers", "--input-topics", "--output-topic", "--application-id", "--max-task-idle-ms",
            "--processing-guarantee", "--commit-interval-ms", "--num-stream-threads", "--close-timeout-ms",
            "--warmup-topics", "--warmup-records");
        for (final String name : values.keySet()) {
            if (!known.contains(name)) {
                throw new UsageException("unknown option " + name + "; known: " + String.join(", ", known) + ", --config");
            }
        }
        final List<String> inputs = Arrays.stream(required(values, "--input-topics").split(","))
            .map(String::trim).filter(s -> !s.isEmpty()).toList();
        if (inputs.isEmpty()) {
            throw new UsageException("--input-topics needs at least one topic name");
        }
        if (inputs.stream().distinct().count() != inputs.size()) {
            throw new UsageException("--input-topics lists a topic twice: " + String.join(",", inputs));
        }
        final String guarantee = values.getOrDefault("--processing-guarantee", "at_least_once");
        if (!GUARANTEES.contains(guarantee)) {
            throw new UsageException("--processing-guarantee " + guarantee + " is not one of at_least_once, exactly_once_v2");
        }
        return new PeerOptions(
            required(values, "--bootstrap-servers"),
            List.copyOf(inputs),
            required(values, "--output-topic"),
            required(values, "--application-id"),
            idleMs(required(values, "--max-task-idle-ms")),
            guarantee,
            number(values, "--commit-interval-ms", 100, 0),
            (int) number(values, "--num-stream-threads", 1, 1),
            Duration.ofMillis(number(values, "--close-timeout-ms", 30_000, 0)),
            Collections.unmodifiableMap(extra),
            Arrays.stream(values.getOrDefault("--warmup-topics", "").split(","))
                .map(String::trim).filter(s -> !s.isEmpty()).toList(),
            number(values, "--warmup-records", 0, 0));
    }

    /** True when a warm-up drain was asked for (both --warmup-topics and --warmup-records). */
    boolean warmsUp() {
        return !warmupTopics.isEmpty() && warmupRecords > 0;
    }

    /** The same settings on the warm-up topics, under their own application id and output topic. */
    PeerOptions forWarmup() {
        return new PeerOptions(bootstrapServers, warmupTopics, outputTopic + "-warmup", applicationId + "-warmup",
            maxTaskIdleMs, processingGuarantee, commitIntervalMs, numStreamThreads, closeTimeout, extraConfig,
            List.of(), 0);
    }

    private static String required(final Map<String, String> values, final String name) throws UsageException {
        final String value = values.get(name);
        if (value == null || value.isBlank()) {
            throw new UsageException(name + " is required");
        }
        return value.trim();
    }

    /** -1 (no idling), 0, a positive number of ms, or "max" (wait forever, without overflow). */
    static long idleMs(final String value) throws UsageException {
        if (value.equalsIgnoreCase("max")) {
            return MergePeer.WAIT_FOREVER_MS;
        }
        try {
            final long ms = Long.parseLong(value);
            if (ms >= -1) {
                return ms;
            }
        } catch (final NumberFormatException e) {
            // reported below
        }
        throw new UsageException("--max-task-idle-ms " + value + " is not -1, 0, a positive number of ms, or max");
    }

    private static long number(final Map<String, String> values, final String name, final long fallback, final long min)
        throws UsageException {
        final String value = values.get(name);
        if (value == null) {
            return fallback;
        }
        try {
            final long n = Long.parseLong(value.trim());
            if (n >= min && n <= Integer.MAX_VALUE) {
                return n;
            }
        } catch (final NumberFormatException e) {
            // reported below
        }
        throw new UsageException(name + " " + value + " is not a whole number from " + min + " to " + Integer.MAX_VALUE);
    }
}
