"""The output side: the encoder that turns emitted records into producer batches (native or
Python, chosen once), the Kafka v2 batches it fills, and the writer that sends them."""
