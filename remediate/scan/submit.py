"""The scan as a Spark application, for spark-submit over a fleet of snapshot directories.

    app=$(python -c 'import remediate.scan.submit as m; print(m.__file__)')
    spark-submit --master spark://host:7077 "$app" \\
        --out /data/fleet-scan /data/snapshots/prod-eu-1 /data/snapshots/prod-us-1

Writes `findings.jsonl` (every finding, OK included, each with its cluster) and `summary.json`
(status per cluster and overall, per-broker summaries) to --out, and prints the summary line.
The exit code is the worst status's (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="remediate-scan", description=__doc__)
    parser.add_argument("snapshots", nargs="+", type=Path, help="snapshot directories")
    parser.add_argument("--out", type=Path, required=True, help="directory for the results")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession  # noqa: PLC0415 - spark-submit provides the session

    from remediate.scan.scanner import classify_snapshots  # noqa: PLC0415

    spark = SparkSession.builder.appName("remediate-scan").getOrCreate()
    try:
        report, _ = classify_snapshots(spark, args.snapshots, out_dir=args.out)
    finally:
        spark.stop()
    print(report.summary_line())
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
