"""Checks the metadata of cdcsync's tables with pyiceberg's SQL catalog.

pyiceberg 0.12 reads the rows of tables in position mode (cdcsync's
default; pyiceberg_read.py compares them) and refuses to scan a snapshot
with equality deletes ("PyIceberg does not yet support equality deletes").
This script checks the rest: schema, identifier fields, partition spec,
snapshots and their summaries (where cdcsync records its binlog position),
the data and delete files, and whether a scan works.

For each table of the request whose catalog is a SQLite file (see
rowjson.py), the answer holds:

  {"catalog", "namespace", "table", "metadata_location", "format_version",
   "identifier_field_ids", "partition_fields": [[source_id, transform, name]],
   "summary": {...current snapshot...}, "delete_files": N,
   "equality_ids": [[...], ...] (distinct), "scan_error": "..." | null,
   "error": "..." | null}

Usage: python pyiceberg_check.py REQUEST.json ANSWER.json
"""

import json
import os
import sys
import traceback

import pyiceberg
from pyiceberg.catalog.sql import SqlCatalog


def catalog_props(c):
    props = {"uri": "sqlite:///" + c["sqlite"], "warehouse": c["warehouse"]}
    s3 = c.get("s3")
    if s3:
        props.update({
            "s3.endpoint": s3["endpoint"],
            "s3.region": s3["region"],
            "s3.access-key-id": s3["access_key_id"],
            "s3.secret-access-key": s3["secret_access_key"],
            "s3.force-virtual-addressing": "false" if s3.get("path_style") else "true",
        })
    return props


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: %s REQUEST.json ANSWER.json" % sys.argv[0])
    with open(sys.argv[1]) as f:
        req = json.load(f)
    catalogs = {}
    for c in req["catalogs"]:
        if c.get("sqlite"):
            # The catalog name must be cdcsync's catalog.name.
            catalogs[c["name"]] = SqlCatalog(c["name"], **catalog_props(c))
    out = {"engine": "pyiceberg %s" % pyiceberg.__version__, "tables": []}
    for t in req["tables"]:
        if t["catalog"] not in catalogs:
            continue
        e = {"catalog": t["catalog"], "namespace": t["namespace"], "table": t["table"], "error": None}
        try:
            tbl = catalogs[t["catalog"]].load_table((t["namespace"], t["table"]))
            snap = tbl.current_snapshot()
            deletes = tbl.inspect.delete_files().to_pylist()
            e.update({
                "metadata_location": tbl.metadata_location,
                "format_version": tbl.format_version,
                "identifier_field_ids": sorted(tbl.schema().identifier_field_ids),
                "partition_fields": [[f.source_id, str(f.transform), f.name] for f in tbl.spec().fields],
                "summary": dict(snap.summary.additional_properties) if snap else None,
                "delete_files": len(deletes),
                "equality_ids": sorted({tuple(d["equality_ids"] or ()) for d in deletes}),
                "scan_error": None,
            })
            try:
                tbl.scan().to_arrow()
            except Exception as ex:  # equality deletes
                e["scan_error"] = "%s: %s" % (type(ex).__name__, ex)
        except Exception:
            e["error"] = traceback.format_exc(limit=20)
        out["tables"].append(e)
    with open(sys.argv[2] + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])


if __name__ == "__main__":
    main()
