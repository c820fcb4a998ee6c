"""Reads cdcsync's Iceberg tables with pyiceberg, as docs/query.md shows.

pyiceberg loads each table from cdcsync's SQL catalog (SQLite catalogs
only: Python has no PostgreSQL client here) and scans its current snapshot
to Arrow, applying the snapshot's position deletes. It has no SQL, so the
Arrow table pyiceberg returned is handed to an in-memory DuckDB connection
only to run the request's SELECTs and filters over it: every row comes from
pyiceberg's scan (see rowjson.py for the request and answer formats).

pyiceberg refuses to scan a snapshot with equality deletes (tables in
equality mode): such a table is answered with that error.

Usage: python pyiceberg_read.py REQUEST.json ANSWER.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rowjson  # noqa: E402

import duckdb  # noqa: E402
import pyiceberg  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402

from pyiceberg_check import catalog_props  # noqa: E402


def main():
    req = rowjson.read_request()
    catalogs = {}
    for c in req["catalogs"]:
        if c.get("sqlite"):
            catalogs[c["name"]] = SqlCatalog(c["name"], **catalog_props(c))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    n = [0]

    def table_ref(t):
        tbl = catalogs[t["catalog"]].load_table((t["namespace"], t["table"]))
        if t.get("metadata_location") and tbl.metadata_location != t["metadata_location"]:
            raise AssertionError("pyiceberg loaded %s, cdcsync's catalog says %s" % (tbl.metadata_location, t["metadata_location"]))
        arrow = tbl.scan().to_arrow()
        n[0] += 1
        name = "pyiceberg_scan_%d" % n[0]
        con.register(name, arrow)
        return name

    def execute(sql):
        cur = con.execute(sql)
        types = [str(d[1]) for d in cur.description]
        return types, cur.fetchall()

    rowjson.run_tables("pyiceberg %s" % pyiceberg.__version__, req, table_ref, execute, rowjson.quote, union=False)


if __name__ == "__main__":
    main()
