"""Reads cdcsync's Iceberg tables with Spark through an Iceberg JDBC catalog.

One Spark session serves every table of the request (see rowjson.py for the
request and answer formats). Each catalog of the request becomes a Spark
catalog of the same name, configured exactly as docs/query.md tells users:

  spark.sql.catalog.<name>             org.apache.iceberg.spark.SparkCatalog
  spark.sql.catalog.<name>.type        jdbc
  spark.sql.catalog.<name>.uri         jdbc:sqlite:<cdcsync's catalog.sql.dsn>
                                       or jdbc:postgresql://host:port/db
  spark.sql.catalog.<name>.jdbc.user   (PostgreSQL) and .jdbc.password
  spark.sql.catalog.<name>.warehouse   cdcsync's warehouse.location
  spark.sql.catalog.<name>.io-impl     org.apache.iceberg.aws.s3.S3FileIO (S3)
  spark.sql.catalog.<name>.s3.*        endpoint, path-style access, keys
  spark.sql.catalog.<name>.client.region

The Spark catalog name must equal cdcsync's catalog.name: the JDBC catalog
looks its tables up by that name (the catalog_name column of iceberg_tables).

Usage: python spark_read.py REQUEST.json ANSWER.json
The jars (Iceberg Spark runtime, Iceberg AWS bundle, SQLite and PostgreSQL
JDBC drivers) come from
the request's "jars" and are passed with spark.jars; nothing is downloaded.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rowjson  # noqa: E402

# Timestamps: Python datetimes are built in the process time zone; the test
# sets TZ=UTC too, and the session time zone is UTC.
os.environ.setdefault("TZ", "UTC")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession  # noqa: E402
import pyspark  # noqa: E402


def catalog_conf(c):
    p = "spark.sql.catalog." + c["name"]
    conf = {
        p: "org.apache.iceberg.spark.SparkCatalog",
        p + ".type": "jdbc",
        p + ".warehouse": c["warehouse"],
        # Always read the catalog's current metadata pointer.
        p + ".cache-enabled": "false",
    }
    pg = c.get("postgres")
    if pg:
        conf[p + ".uri"] = "jdbc:postgresql://%s:%d/%s" % (pg["host"], pg["port"], pg["database"])
        conf[p + ".jdbc.user"] = pg["user"]
        if pg.get("password"):
            conf[p + ".jdbc.password"] = pg["password"]
    else:
        conf[p + ".uri"] = "jdbc:sqlite:" + c["sqlite"]
    s3 = c.get("s3")
    if s3:
        conf.update({
            p + ".io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
            p + ".s3.endpoint": s3["endpoint"],
            p + ".s3.path-style-access": "true" if s3.get("path_style") else "false",
            p + ".s3.access-key-id": s3["access_key_id"],
            p + ".s3.secret-access-key": s3["secret_access_key"],
            p + ".client.region": s3["region"],
        })
    return conf


def main():
    req = rowjson.read_request()
    b = (SparkSession.builder.master("local[2]").appName("cdcsync-engine-test")
         .config("spark.jars", ",".join(req["jars"]))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.shuffle.partitions", "2"))
    for c in req["catalogs"]:
        for k, v in catalog_conf(c).items():
            b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")

    def table_ref(t):
        return ".".join(rowjson.quote(x, "`") for x in (t["catalog"], t["namespace"], t["table"]))

    def execute(sql):
        df = spark.sql(sql)
        types = [f.dataType.simpleString() for f in df.schema.fields]
        return types, [tuple(r) for r in df.collect()]

    rowjson.run_tables("spark %s" % pyspark.__version__, req, table_ref, execute, lambda c: rowjson.quote(c, "`"))
    spark.stop()


if __name__ == "__main__":
    main()
