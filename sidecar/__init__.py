"""timesync sidecar: merges Kafka input partitions in event-time order into one ordered topic."""

__version__ = "0.1.0"
