"""The Python file that ``spark-submit`` runs inside the timesync-spark image.

Spark on Kubernetes (spark-submit or the Spark operator) launches a *file*, not a console
script, so this forwards to the same CLI as ``timesync-spark``:

    spark-submit ... local:///opt/timesync/spark_main.py join --bootstrap-servers ... --topic ...
"""

import sys

from spark_consumer.cli import main

if __name__ == "__main__":
    sys.exit(main())
