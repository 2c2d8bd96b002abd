package io.timesync.peer;

/**
 * SIGTERM / SIGINT handling that lets the peer close Kafka Streams and exit 0. A plain shutdown
 * hook would also run, but the JVM then exits with 143 whatever the hook did.
 */
final class Signals {

    private Signals() {
    }

    @SuppressWarnings("removal")
    static void onTermination(final Runnable action) {
        for (final String name : new String[] {"TERM", "INT"}) {
            try {
                sun.misc.Signal.handle(new sun.misc.Signal(name), signal -> action.run());
            } catch (final IllegalArgumentException | UnsupportedOperationException e) {
                // The signal is reserved on this JVM; the shutdown hook in MergePeer still closes the instance.
                System.err.println("warning: cannot handle SIG" + name + " (" + e.getMessage() + "); relying on the shutdown hook");
            }
        }
    }
}
