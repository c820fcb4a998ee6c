package integration

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// pyicebergTable is one table of integration/engines/pyiceberg_check.py's
// answer.
type pyicebergTable struct {
	Catalog            string            `json:"catalog"`
	Namespace          string            `json:"namespace"`
	Table              string            `json:"table"`
	MetadataLocation   string            `json:"metadata_location"`
	FormatVersion      int               `json:"format_version"`
	IdentifierFieldIDs []int             `json:"identifier_field_ids"`
	PartitionFields    [][]any           `json:"partition_fields"`
	Summary            map[string]string `json:"summary"`
	DeleteFiles        int               `json:"delete_files"`
	EqualityIDs        [][]int           `json:"equality_ids"`
	ScanError          *string           `json:"scan_error"`
	Error              *string           `json:"error"`
}

// pyicebergPartitions is the partition spec each workload table must have,
// as pyiceberg prints it: [source field id, transform, name].
var pyicebergPartitions = map[string]string{
	"items":  `[[2,"identity","region"]]`,
	"pairs":  `[]`,
	"events": `[[2,"day","created_day"],[1,"bucket[4]","id_bucket"]]`,
}

// checkPyiceberg reads the metadata of the SQLite-catalog tables with
// pyiceberg's SQL catalog, as docs/query.md shows, and checks what an
// analyst relies on: tables in position mode have position deletes only,
// which pyiceberg scans (pyiceberg_read.py compares its rows).
func checkPyiceberg(t *testing.T, m *engineManifest, req engineRequest, runs []*engineRun) {
	var ans struct {
		Engine string           `json:"engine"`
		Tables []pyicebergTable `json:"tables"`
	}
	took, _ := runPythonScript(t, m, "pyiceberg_check.py", req, nil, &ans)
	t.Logf("%s checked %d tables in %s", ans.Engine, len(ans.Tables), took)
	byName := map[string]pyicebergTable{}
	for _, pt := range ans.Tables {
		byName[pt.Catalog+"."+pt.Namespace+"."+pt.Table] = pt
	}
	checked := 0
	for _, r := range runs {
		if r.catalog.SQLite == "" {
			continue
		}
		for _, et := range req.Tables {
			if et.Catalog != r.catalog.Name {
				continue
			}
			name := et.Catalog + "." + et.Namespace + "." + et.Table
			pt, ok := byName[name]
			if !ok {
				t.Errorf("pyiceberg did not answer for %s", name)
				continue
			}
			checked++
			if pt.Error != nil {
				t.Errorf("pyiceberg cannot load %s:\n%s", name, *pt.Error)
				continue
			}
			if pt.MetadataLocation != et.MetadataLocation {
				t.Errorf("pyiceberg: %s metadata %s, cdcsync's catalog %s", name, pt.MetadataLocation, et.MetadataLocation)
			}
			want := 2
			if r.e.cfg.Deletes.Mode == "dv" {
				want = 3
			}
			if pt.FormatVersion != want {
				t.Errorf("pyiceberg: %s format version %d, want %d", name, pt.FormatVersion, want)
			}
			ts := engineMySQLSchema(t, r.e.server, r.e.dbName, et.Table)
			var pk []int
			for _, k := range ts.PrimaryKey {
				pk = append(pk, k+1)
			}
			if !reflect.DeepEqual(pt.IdentifierFieldIDs, pk) {
				t.Errorf("pyiceberg: %s identifier fields %v, want the primary key %v", name, pt.IdentifierFieldIDs, pk)
			}
			parts, _ := json.Marshal(pt.PartitionFields)
			if want := pyicebergPartitions[et.Table]; string(parts) != want {
				t.Errorf("pyiceberg: %s partition fields %s, want %s", name, parts, want)
			}
			// The newest snapshot is an epoch's, or a compaction's after it
			// (staged rows are moved until none is left).
			epoch := pt.Summary["cdcsync.pipeline"] == r.e.cfg.Pipeline && strings.Contains(pt.Summary["cdcsync.position"], `"flavor":"mariadb"`)
			if !epoch && pt.Summary["cdcsync.maintenance"] != "compaction" {
				t.Errorf("pyiceberg: %s current snapshot summary is neither an epoch's (pipeline and position) nor a compaction's: %v", name, pt.Summary)
			}
			// Position mode (the default) and dv mode: position deletes
			// (or deletion vectors) only, which pyiceberg applies; its rows
			// are compared in TestEngines.
			if pt.DeleteFiles == 0 || fmt.Sprint(pt.EqualityIDs) != "[[]]" {
				t.Errorf("pyiceberg: %s has %d delete files with equality ids %v, want position deletes only", name, pt.DeleteFiles, pt.EqualityIDs)
			}
			if pt.ScanError != nil {
				t.Errorf("pyiceberg %s cannot scan %s, which has position deletes only: %s", ans.Engine, name, *pt.ScanError)
			}
		}
	}
	if checked == 0 {
		t.Fatal("pyiceberg checked no table")
	}
}
