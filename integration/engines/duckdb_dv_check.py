"""Counts the rows of Iceberg snapshots with DuckDB, with its external file
cache on (DuckDB's default) and off (what docs/query.md tells users to set).

DuckDB's iceberg extension 1.5.5 reads a deletion vector through DuckDB's
external file cache and takes the start of whatever cached range holds it,
so in a Puffin file of several vectors one data file can get another's
vector (fixed upstream in duckdb-iceberg 8b2e25f, "fix issue with multiple
blobs in puffin delete file", after 1.5.5's build). duckdb_read.connect()
turns the cache off; this script also counts with it on, so that the test
notices when a DuckDB upgrade makes the setting unnecessary.

Usage: python duckdb_dv_check.py REQUEST.json ANSWER.json
  REQUEST: {"metadata": "/path/vN.metadata.json", "snapshots": [id, ...]}
  ANSWER:  {"duckdb": "1.5.5", "cache_off": [[count, sum_id], ...], "cache_on": [[count, sum_id], ...]}
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import duckdb  # noqa: E402
import duckdb_read  # noqa: E402


def counts(con, meta, snapshots):
    out = []
    for sid in snapshots:
        n, s = con.execute("SELECT count(*), coalesce(sum(id), 0) FROM iceberg_scan(%s, snapshot_from_id => %d)"
                           % (duckdb_read.lit(meta), int(sid))).fetchone()
        out.append([int(n), int(s)])
    return out


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    off = duckdb_read.connect()
    on = duckdb_read.connect()
    on.execute("SET enable_external_file_cache = true")
    ans = {
        "duckdb": duckdb.__version__,
        "cache_off": counts(off, req["metadata"], req["snapshots"]),
        "cache_on": counts(on, req["metadata"], req["snapshots"]),
    }
    with open(sys.argv[2], "w") as f:
        json.dump(ans, f)


if __name__ == "__main__":
    main()
