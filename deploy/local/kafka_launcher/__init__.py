"""The parts of the local Kafka launcher (``deploy/local/kafka.py``, its command line and the names
the tests and the benchmark import). Standard library only, like the launcher.

Bottom-up, none importing one above it: :mod:`.install` (the checkout's folders, Java, the broker
jars, :class:`~.install.LauncherError`); :mod:`.processes` (JVMs started, signalled, reaped);
:mod:`.network` (ports, and whether a broker answers); :mod:`.properties` (``server.properties``
and the log configuration); :mod:`.security` (SCRAM users, PEM key and trust stores);
:mod:`.broker` (one broker: :func:`~.broker.start_broker`); :mod:`.cluster` (combined KRaft nodes:
:func:`~.cluster.start_cluster`); :mod:`.arguments` (the command line's parser and options).

``kafka.py`` loads this package by its path (it runs as a script and is imported by path, so the
package is not on ``sys.path``), under the name ``timesync_kafka_launcher``; the modules import
each other relatively.
"""
