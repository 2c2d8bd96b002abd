"""``python -m spark_consumer JOB ...`` — the same as ``timesync-spark``."""

from spark_consumer.cli import main

raise SystemExit(main())
