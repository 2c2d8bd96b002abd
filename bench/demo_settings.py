"""What ``make demo`` runs: its topics, its sizes and the settings of its sidecar and Spark jobs.

Their own module so that the demo's parts (:mod:`bench.demo`, :mod:`bench.demo_arrivals`,
:mod:`bench.demo_spark`) share them without importing each other.
"""

from __future__ import annotations

from pathlib import Path

IMPRESSIONS, CLICKS, ORDERED = "demo.impressions", "demo.clicks", "demo.ordered"
#: The raw inputs as one topic, in the order the plain consumer received them.
RAW_ARRIVALS = "demo.raw-arrivals"
DURATION_S = 30.0
IDLE_MS = 2_500
LAG_MS = 8_000
SPARK_DELAY_MS = 1_000
#: Arrivals per replayed micro-batch, in seconds: well under the lagging partition's 8 s.
REPLAY_BATCH_S = 2.0
OUT = Path("demo-output")
SPARK_OUTPUTS = ("counts-live", "counts-ordered", "counts-raw", "clicks-joined", "final-per-ad")
