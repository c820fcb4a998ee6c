package capture

// This file parses DDL with the TiDB parser (github.com/pingcap/tidb/pkg/parser).

import (
	"github.com/pingcap/tidb/pkg/parser"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal values in the AST
)

var _ = parser.New
