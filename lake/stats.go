package lake

import (
	"strconv"

	"github.com/apache/iceberg-go/table"
)

// TableStats describes a table's current snapshot, from its summary.
type TableStats struct {
	DataFiles   int64
	DeleteFiles int64
	DeleteRows  int64 // equality and position delete rows
	Records     int64 // rows in the data files, before deletes
	FilesBytes  int64 // data and delete files
	Snapshots   int
}

// AvgFileBytes is the average size of a live file, data or delete.
func (s TableStats) AvgFileBytes() float64 {
	if n := s.DataFiles + s.DeleteFiles; n > 0 {
		return float64(s.FilesBytes) / float64(n)
	}
	return 0
}

// Stats reads the table's statistics from its current snapshot summary.
func (t *Table) Stats() TableStats { return statsOf(t.current()) }

func statsOf(tbl *table.Table) TableStats {
	st := TableStats{Snapshots: len(tbl.Metadata().Snapshots())}
	s := tbl.CurrentSnapshot()
	if s == nil || s.Summary == nil {
		return st
	}
	n := func(k string) int64 {
		v, _ := strconv.ParseInt(s.Summary.Properties[k], 10, 64)
		return v
	}
	st.DataFiles = n("total-data-files")
	st.DeleteFiles = n("total-delete-files")
	st.DeleteRows = n("total-equality-deletes") + n("total-position-deletes")
	st.Records = n("total-records")
	st.FilesBytes = n("total-files-size")
	return st
}
