package main

import (
	_ "github.com/apache/iceberg-go"
	_ "github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/go-mysql-org/go-mysql/client"
	_ "github.com/go-mysql-org/go-mysql/replication"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/term"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)

func main() {}
