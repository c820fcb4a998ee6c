"""Times full scans of Iceberg snapshots with DuckDB's iceberg extension.

The bench harness's second reader for the read amplification phase
(bench/duckscan.go): iceberg-go applies a position delete by copying every
column of a record batch that has one, DuckDB by a selection vector, so the
two read the same snapshot at different costs. Each snapshot is scanned
ROUNDS times, every column read (a hash of the whole row), and the fastest
scan is reported.

Usage: python duckscan.py ENGINES_DIR < REQUEST.json > ANSWER.json
  REQUEST: {"metadata": "/path/v3.metadata.json", "snapshots": [id, ...], "rounds": 2}
  ANSWER:  {"duckdb": "1.5.5", "scans": [{"snapshot": id, "rows": n, "seconds": s}, ...]}
"""

import json
import sys
import time

sys.path.insert(0, sys.argv[1])
import duckdb  # noqa: E402
import duckdb_read  # noqa: E402


def main():
    req = json.load(sys.stdin)
    con = duckdb_read.connect()
    meta = duckdb_read.lit(req["metadata"])
    scans = []
    for sid in req["snapshots"]:
        best, rows = None, None
        for _ in range(req["rounds"]):
            t0 = time.perf_counter()
            n, _ = con.execute(
                "SELECT count(*), sum(hash(t)) FROM iceberg_scan(%s, snapshot_from_id => %d) t" % (meta, int(sid))).fetchone()
            s = time.perf_counter() - t0
            if rows is not None and n != rows:
                raise SystemExit("snapshot %d: a scan returned %d rows, the one before %d" % (sid, n, rows))
            rows, best = n, s if best is None else min(best, s)
        scans.append({"snapshot": sid, "rows": rows, "seconds": best})
    json.dump({"duckdb": duckdb.__version__, "scans": scans}, sys.stdout)


if __name__ == "__main__":
    main()
