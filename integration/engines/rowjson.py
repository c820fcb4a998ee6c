"""Shared by the engine readers: the request they read and the JSON they write.

The request (a JSON file) names the catalogs cdcsync wrote and the tables to
read:

  {"catalogs": [{"name": "cdcsync",
                 "sqlite": "/path/catalog.db"   (or "postgres": {"host": ..., "port": ...,
                                                  "database": ..., "user": ..., "password": ...}),
                 "warehouse": "s3://bucket/lake" | "file:///dir",
                 "s3": {"endpoint": "http://127.0.0.1:9000", "region": "us-east-1",
                        "access_key_id": "...", "secret_access_key": "...",
                        "path_style": true} | null}],
   "tables": [{"catalog": "cdcsync", "namespace": "db", "table": "items",
               "columns": ["id", "region", ...],
               "metadata_location": "s3://.../metadata/00004-....metadata.json",
               "filters": ["\"id\" >= 75", ...]}],
   "jars": ["/path/iceberg-spark-runtime.jar", ...]}      (Spark only)

The answer (a JSON file) has one entry per table, in request order:

  {"engine": "spark 4.0.5", "tables": [{"catalog": ..., "namespace": ..., "table": ...,
     "types": ["int", ...], "rows": [[...], ...],
     "filtered": [[<filter index>, ...], ...], "error": null, "seconds": 0.4}]}

Values are encoded so that nothing is lost on the way to Go: integers as JSON
numbers, floats as their shortest repr string ("nan", "inf" allowed),
decimals as plain-notation strings, binary as base64, dates as YYYY-MM-DD,
timestamps as integer microseconds since 1970-01-01 UTC (a naive datetime is
taken as UTC, an aware one converted to UTC). Anything else is
{"unsupported": "<type>: <repr>"} so the Go side reports it.
"""

import base64
import datetime
import decimal
import json
import sys
import time
import traceback

EPOCH = datetime.datetime(1970, 1, 1)
EPOCH_TZ = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
MICRO = datetime.timedelta(microseconds=1)


def encode(v):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            return (v - EPOCH) // MICRO
        return (v - EPOCH_TZ) // MICRO
    if isinstance(v, datetime.date):
        return v.isoformat()
    return {"unsupported": "%s: %r" % (type(v).__name__, v)}


def read_request():
    if len(sys.argv) != 3:
        sys.exit("usage: %s REQUEST.json ANSWER.json" % sys.argv[0])
    with open(sys.argv[1]) as f:
        return json.load(f)


def quote(name, q='"'):
    return q + name.replace(q, q + q) + q


def isolate(execute, cols, ref, filters):
    """Runs each filter alone, to tell which one an engine fails on."""
    out = []
    for f in filters:
        try:
            execute("SELECT %s FROM %s WHERE %s" % (cols, ref, f))
            out.append("alone OK: " + f)
        except Exception as ex:
            out.append("alone FAILS: %s: %s" % (f, str(ex).splitlines()[0]))
    return "\n".join(out)


def run_tables(engine, request, table_ref, execute, quote_ident, union=True):
    """Reads each table of the request and writes the answer.

    table_ref(t) is the SQL the engine reads table t with, execute(sql)
    returns (types, rows), quote_ident(name) quotes a column name. For each
    table it runs SELECT <columns> FROM <table>, then, when the request has
    filters (WHERE clauses in this engine's dialect), one UNION ALL query
    whose first column says which filter a row matched (or, with
    union=False, one query per filter): what the engine's partition and
    min/max pruning keeps must still be every matching row.
    A table that fails is reported with its error; the others are still read.
    """
    answer = {"engine": engine, "tables": []}
    for t in request["tables"]:
        entry = {"catalog": t["catalog"], "namespace": t["namespace"], "table": t["table"],
                 "types": None, "rows": None, "filtered": None, "error": None}
        start = time.monotonic()
        try:
            cols = ", ".join(quote_ident(c) for c in t["columns"])
            ref = table_ref(t)
            types, rows = execute("SELECT %s FROM %s" % (cols, ref))
            entry["types"] = types
            entry["rows"] = [[encode(v) for v in r] for r in rows]
            filters = t.get("filters") or []
            if filters and not union:
                entry["filtered"] = []
                for i, f in enumerate(filters):
                    try:
                        _, rows = execute("SELECT %d, %s FROM %s WHERE %s" % (i, cols, ref, f))
                    except Exception as ex:
                        raise RuntimeError("%s\nin filter %s" % (ex, f)) from ex
                    entry["filtered"] += [[encode(v) for v in r] for r in rows]
            elif filters:
                sql = " UNION ALL ".join(
                    "SELECT %d AS %s, %s FROM %s WHERE %s" % (i, quote_ident("cdcsync_filter"), cols, ref, f)
                    for i, f in enumerate(filters))
                try:
                    _, rows = execute(sql)
                except Exception as ex:
                    raise RuntimeError("%s\nin %s\n%s" % (ex, sql, isolate(execute, cols, ref, filters))) from ex
                entry["filtered"] = [[encode(v) for v in r] for r in rows]
        except Exception:  # reported to the Go test, which fails on it
            entry["error"] = traceback.format_exc(limit=20)
        entry["seconds"] = round(time.monotonic() - start, 3)
        answer["tables"].append(entry)
    with open(sys.argv[2] + ".tmp", "w") as f:
        json.dump(answer, f)
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
