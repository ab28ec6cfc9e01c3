"""The scan: classify snapshots on Spark and report."""
