"""Run every benchmark with CI-sized defaults; each prints its own ratio line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
BENCHMARKS = [
    ["bench_run.py"],
    ["bench_controller.py", "--n", "100000"],
    ["bench_slot_workers.py"],
    ["bench_controller_scale.py"],
    ["bench_admission.py"],
    ["bench_store.py"],
    ["bench_store_postgres.py"],
    ["bench_control.py"],
    ["bench_cli.py"],
    ["bench_queue.py"],
    ["bench_pipeline.py"],
    ["bench_process.py", "--n", "2000", "--stops", "200"],
    ["bench_dashboard_charts.py"],
    ["bench_durable.py"],
    ["bench_children.py"],
    ["bench_stored_pipeline.py"],
    ["bench_child_roundtrip.py", "--n", "100"],  # DBOS beside it when the bench extra is in
    ["bench_durable_dbos.py"],  # DBOS beside chongming; skipped without the bench extra
    ["bench_prune.py"],
    ["bench_schedules.py"],
    ["bench_rate_limits.py"],
    ["bench_claim_aging.py"],
    ["bench_dashboard.py"],
]


def main() -> int:
    failures = 0
    for name, *args in BENCHMARKS:
        path = HERE / name
        if not path.exists():
            continue
        print(f"== {name}", flush=True)
        result = subprocess.run([sys.executable, str(path), *args], check=False)
        failures += result.returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
