"""Queries the Iceberg tables of the cdcsync quick start with DuckDB.

Without arguments, prints every table of the catalog whenever cdcsync
commits to it (its current metadata file changes), checking every few
seconds. With an SQL statement, runs it once and prints the result; the
tables are views named NAMESPACE.TABLE (shop.orders).

DuckDB attaches only REST Iceberg catalogs, so this does what docs/query.md
describes: it reads each table's current metadata file from cdcsync's SQL
catalog (SQLite, the iceberg_tables table) and scans it with
iceberg_scan(), which applies the equality deletes cdcsync writes.

Environment: CATALOG_DB (the SQLite catalog file), CATALOG_NAME (cdcsync's
catalog.name), S3_ENDPOINT (host:port), S3_ACCESS_KEY, S3_SECRET_KEY,
S3_REGION (default us-east-1), S3_USE_SSL (default false), POLL_SECONDS
(default 3), MAX_ROWS (default 20 rows a table).
"""

import glob
import os
import sqlite3
import sys
import time
import urllib.parse

import duckdb
import duckdb_extension_avro
import duckdb_extension_httpfs
import duckdb_extension_iceberg


def lit(s):
    return "'" + str(s).replace("'", "''") + "'"


def ident(s):
    return '"' + s.replace('"', '""') + '"'


def extension_file(module):
    d = os.path.join(os.path.dirname(module.__file__), "extensions", "v" + duckdb.__version__)
    files = glob.glob(os.path.join(d, "*.duckdb_extension"))
    if len(files) != 1:
        raise SystemExit("query.py: no %s extension file for DuckDB %s in %s" % (module.__name__, duckdb.__version__, d))
    return files[0]


def connect():
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    con.execute("SET TimeZone = 'UTC'")
    for m in (duckdb_extension_httpfs, duckdb_extension_avro, duckdb_extension_iceberg):
        con.execute("LOAD " + lit(extension_file(m)))
    if os.environ.get("S3_ENDPOINT"):
        con.execute(
            "CREATE SECRET warehouse (TYPE s3, KEY_ID %s, SECRET %s, REGION %s, ENDPOINT %s, URL_STYLE 'path', USE_SSL %s)"
            % (lit(os.environ.get("S3_ACCESS_KEY", "")), lit(os.environ.get("S3_SECRET_KEY", "")),
               lit(os.environ.get("S3_REGION", "us-east-1")), lit(os.environ["S3_ENDPOINT"]),
               "true" if os.environ.get("S3_USE_SSL", "false") == "true" else "false"))
    return con


def tables():
    """{(namespace, table): metadata file} of the catalog, or {} before cdcsync made it."""
    path = os.environ.get("CATALOG_DB", "/var/lib/cdcsync/catalog.db")
    if not os.path.exists(path):
        return {}
    db = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(path), uri=True, timeout=10)
    try:
        rows = db.execute(
            "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables WHERE catalog_name = ?",
            (os.environ.get("CATALOG_NAME", "cdcsync"),)).fetchall()
    except sqlite3.OperationalError:  # no iceberg_tables yet
        return {}
    finally:
        db.close()
    return {(ns, t): loc for ns, t, loc in rows if loc}


def define_views(con, current):
    for (ns, t), loc in sorted(current.items()):
        con.execute("CREATE SCHEMA IF NOT EXISTS " + ident(ns))
        con.execute("CREATE OR REPLACE VIEW %s.%s AS SELECT * FROM iceberg_scan(%s)" % (ident(ns), ident(t), lit(loc)))


def show(con, sql, limit=None):
    rel = con.sql(sql)
    if rel is None:
        return
    if limit is not None:
        rel = rel.limit(limit)
    rel.show(max_rows=limit or 10000, max_width=200)


def watch(con):
    seen = {}
    limit = int(os.environ.get("MAX_ROWS", "20"))
    poll = float(os.environ.get("POLL_SECONDS", "3"))
    print("waiting for cdcsync to create the tables...", flush=True)
    while True:
        current = tables()
        changed = sorted(k for k, loc in current.items() if seen.get(k) != loc)
        if changed:
            define_views(con, current)
            for ns, t in changed:
                print("\n%s.%s (%s):" % (ns, t, time.strftime("%H:%M:%S")), flush=True)
                try:
                    show(con, "SELECT * FROM %s.%s ORDER BY 1" % (ident(ns), ident(t)), limit)
                except duckdb.Error as e:
                    print("  cannot read it yet: %s" % e, flush=True)
                    continue
                seen[(ns, t)] = current[(ns, t)]
            sys.stdout.flush()
        time.sleep(poll)


def main():
    con = connect()
    if len(sys.argv) > 1:
        current = tables()
        if not current:
            raise SystemExit("query.py: the catalog has no tables yet; is cdcsync running?")
        define_views(con, current)
        show(con, " ".join(sys.argv[1:]))
        return
    watch(con)


if __name__ == "__main__":
    main()
