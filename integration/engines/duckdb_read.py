"""Reads cdcsync's Iceberg tables with DuckDB's iceberg extension.

DuckDB attaches only REST Iceberg catalogs, so the reader does what
docs/query.md tells users: it looks up the table's current metadata file in
cdcsync's SQL catalog (the iceberg_tables table, keyed by catalog name,
namespace and table name) and scans it with iceberg_scan(<metadata file>).
iceberg_scan applies the equality and position deletes of the snapshot.

The extensions (iceberg, avro, httpfs) are loaded from the files of their
PyPI packages (duckdb-extension-*); auto-install and auto-load are off, so
DuckDB never downloads anything. One DuckDB connection serves every table of
the request (see rowjson.py for the request and answer formats).

Usage: python duckdb_read.py REQUEST.json ANSWER.json
"""

import glob
import os
import sqlite3
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rowjson  # noqa: E402

import duckdb  # noqa: E402
import duckdb_extension_avro  # noqa: E402
import duckdb_extension_httpfs  # noqa: E402
import duckdb_extension_iceberg  # noqa: E402


def extension_file(module):
    d = os.path.join(os.path.dirname(module.__file__), "extensions", "v" + duckdb.__version__)
    files = glob.glob(os.path.join(d, "*.duckdb_extension"))
    if len(files) != 1:
        raise SystemExit("%s: no extension file for DuckDB %s in %s" % (module.__name__, duckdb.__version__, d))
    return files[0]


def connect():
    con = duckdb.connect(config={
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    })
    # TIMESTAMP WITH TIME ZONE values come back as aware datetimes in this zone.
    con.execute("SET TimeZone = 'UTC'")
    # The iceberg extension 1.5.5 misreads deletion vectors through this
    # cache when a Puffin file holds several (dv tables): one data file gets
    # another's vector. docs/query.md tells users to set this too;
    # duckdb_dv_check.py notices when an upgrade makes it unnecessary.
    con.execute("SET enable_external_file_cache = false")
    for m in (duckdb_extension_httpfs, duckdb_extension_avro, duckdb_extension_iceberg):
        con.execute("LOAD " + lit(extension_file(m)))
    return con


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def metadata_location(catalog, namespace, table):
    """The table's current metadata file, as cdcsync's SQL catalog records it."""
    # mode=rw: fail on a wrong path instead of creating an empty database.
    db = sqlite3.connect("file:%s?mode=rw" % urllib.parse.quote(catalog["sqlite"]), uri=True)
    try:
        row = db.execute(
            "SELECT metadata_location FROM iceberg_tables"
            " WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
            (catalog["name"], namespace, table)).fetchone()
    finally:
        db.close()
    if row is None:
        raise LookupError("no table %s.%s in catalog %s of %s" % (namespace, table, catalog["name"], catalog["sqlite"]))
    return row[0]


def main():
    req = rowjson.read_request()
    con = connect()
    catalogs = {c["name"]: c for c in req["catalogs"]}
    for i, c in enumerate(req["catalogs"]):
        s3 = c.get("s3")
        if not s3:
            continue
        endpoint = s3["endpoint"]
        use_ssl = not endpoint.startswith("http://")
        endpoint = endpoint.split("://", 1)[-1].rstrip("/")
        bucket = c["warehouse"].split("://", 1)[1].split("/", 1)[0]
        con.execute(
            "CREATE SECRET s3_%d (TYPE s3, KEY_ID %s, SECRET %s, REGION %s, ENDPOINT %s,"
            " URL_STYLE %s, USE_SSL %s, SCOPE %s)" % (
                i, lit(s3["access_key_id"]), lit(s3["secret_access_key"]), lit(s3["region"]), lit(endpoint),
                lit("path" if s3.get("path_style") else "vhost"), "true" if use_ssl else "false",
                lit("s3://" + bucket)))

    def table_ref(t):
        c = catalogs[t["catalog"]]
        if c.get("sqlite"):
            loc = metadata_location(c, t["namespace"], t["table"])
            if t.get("metadata_location") and loc != t["metadata_location"]:
                raise AssertionError("iceberg_tables says %s, cdcsync's catalog %s" % (loc, t["metadata_location"]))
        else:
            # A PostgreSQL catalog: the same SELECT on iceberg_tables, run by
            # the test (Python has no PostgreSQL client here).
            loc = t["metadata_location"]
        return "iceberg_scan(%s)" % lit(loc)

    def execute(sql):
        cur = con.execute(sql)
        types = [str(d[1]) for d in cur.description]
        return types, cur.fetchall()

    # One query per filter: DuckDB's iceberg extension (1.5.5) fails a UNION
    # ALL of filtered scans of a table with many equality deletes ("INTERNAL
    # Error: Information loss on integer cast"): its cardinality estimate,
    # data rows minus delete rows of the manifests left after pruning, is an
    # unsigned integer that wraps below zero. See docs/query.md.
    rowjson.run_tables("duckdb %s" % duckdb.__version__, req, table_ref, execute, rowjson.quote, union=False)


if __name__ == "__main__":
    main()
