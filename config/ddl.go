package config

import (
	"fmt"
	"strings"
)

// DDL says how cdcsync follows schema changes it reads in the binlog.
type DDL struct {
	// Incompatible is the policy for a change Iceberg cannot express (for
	// example VARCHAR to INT): stop (default) stops mirroring the table with
	// an error; recopy copies the table again from MySQL, online. A table
	// rule's ddl_incompatible overrides it for one table.
	Incompatible string `yaml:"incompatible"`
	// DropTable is the policy for DROP TABLE of a mirrored table: keep
	// (default) keeps the Iceberg table with its rows as of the DROP and
	// stops mirroring it; drop drops the Iceberg table too.
	DropTable string `yaml:"drop_table"`
	// RenameTable is the policy for RENAME TABLE of a mirrored table to a
	// name that is mirrored too: follow (default) renames the Iceberg table
	// and keeps mirroring it; keep keeps the old Iceberg table as of the
	// rename (not mirrored any more) and copies the new name as a new table.
	// A rename to a name that is not mirrored is always a DROP.
	RenameTable string `yaml:"rename_table"`
	// OnlineSchemaChange: follow (default) never mirrors the shadow tables
	// of gh-ost (_t_gho, _t_ghc, _t_del) and pt-online-schema-change (_t_new,
	// _t_old) and applies their final swap as a schema change of t; off
	// treats those names like any other table.
	OnlineSchemaChange string `yaml:"online_schema_change"`
}

// DDL policies.
const (
	DDLStop   = "stop"
	DDLRecopy = "recopy"
	DDLKeep   = "keep"
	DDLDrop   = "drop"
	DDLFollow = "follow"
	DDLOff    = "off"
)

var (
	ddlIncompatible = []string{DDLStop, DDLRecopy}
	ddlDropTable    = []string{DDLKeep, DDLDrop}
	ddlRenameTable  = []string{DDLFollow, DDLKeep}
	ddlOnline       = []string{DDLFollow, DDLOff}
)

func (c *Config) applyDDLDefaults() {
	def := func(p string, v *string, d string) {
		if *v == "" && !c.explicit(p) {
			*v = d
		}
		*v = strings.ToLower(strings.TrimSpace(*v))
	}
	d := &c.DDL
	def("ddl.incompatible", &d.Incompatible, DDLStop)
	def("ddl.drop_table", &d.DropTable, DDLKeep)
	def("ddl.rename_table", &d.RenameTable, DDLFollow)
	def("ddl.online_schema_change", &d.OnlineSchemaChange, DDLFollow)
	c.Source.keepShadows = d.OnlineSchemaChange == DDLOff
	for i := range c.Tables {
		r := &c.Tables[i]
		r.DDLIncompatible = strings.ToLower(strings.TrimSpace(r.DDLIncompatible))
	}
}

func (p *problems) ddl() {
	d := &p.c.DDL
	p.enum("ddl.incompatible", d.Incompatible, ddlIncompatible)
	p.enum("ddl.drop_table", d.DropTable, ddlDropTable)
	p.enum("ddl.rename_table", d.RenameTable, ddlRenameTable)
	p.enum("ddl.online_schema_change", d.OnlineSchemaChange, ddlOnline)
	for i := range p.c.Tables {
		if v := p.c.Tables[i].DDLIncompatible; v != "" {
			p.enum(fmt.Sprintf("tables[%d].ddl_incompatible", i), v, ddlIncompatible)
		}
	}
}

// IncompatiblePolicy is the policy (DDLStop or DDLRecopy) for a schema
// change of db.table that Iceberg cannot express.
func (c *Config) IncompatiblePolicy(db, table string) string {
	if r := c.Rule(db, table); r != nil && r.DDLIncompatible != "" {
		return r.DDLIncompatible
	}
	if c.DDL.Incompatible == "" {
		return DDLStop
	}
	return c.DDL.Incompatible
}

// DropTablePolicy is ddl.drop_table: DDLKeep or DDLDrop.
func (c *Config) DropTablePolicy() string { return c.DDL.DropTable }

// RenameTablePolicy is ddl.rename_table: DDLFollow or DDLKeep.
func (c *Config) RenameTablePolicy() string { return c.DDL.RenameTable }

// shadowSuffixes are the table name suffixes of the shadow tables of gh-ost
// (_t_gho: the new table, _t_ghc: its changelog, _t_del: the old table after
// the swap) and pt-online-schema-change (_t_new, _t_old).
var shadowSuffixes = []string{"_gho", "_ghc", "_del", "_new", "_old"}

// ShadowOf reports whether table is named like a shadow table of an online
// schema change tool, and returns the name of the table it shadows and the
// tool's suffix ("_gho", "_new", ...). gh-ost names them _t_gho, _t_ghc and
// _t_del (or _t_<timestamp>_del); pt-online-schema-change _t_new and _t_old,
// with more leading underscores when the name is taken.
func ShadowOf(table string) (base, suffix string, ok bool) {
	if !strings.HasPrefix(table, "_") {
		return "", "", false
	}
	for _, s := range shadowSuffixes {
		if strings.HasSuffix(table, s) && len(table) > len(s)+1 {
			return strings.TrimLeft(table[:len(table)-len(s)], "_"), s, true
		}
	}
	return "", "", false
}

// FollowsShadows reports whether shadow tables of online schema change tools
// are recognized (ddl.online_schema_change: follow).
func (s *Source) FollowsShadows() bool { return !s.keepShadows }
