"""The Schema Registry protocol (Confluent's REST API), without I/O: where the credentials may go
(:mod:`.urls`) and what an answer means (:mod:`.answers`). The sidecar's aiohttp client and the
Spark jobs' standard-library client are transports over it."""
