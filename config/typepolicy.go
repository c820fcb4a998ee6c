package config

import "strings"

// Types holds the policies for MySQL values that Iceberg cannot hold, one
// per column type. Each is TypeError (the default: stop with an error that
// names the table, the column, the value and the binlog position),
// TypeToNull or TypeToEpoch. docs/types.md describes them.
type Types struct {
	// ZeroDate is the policy for DATE values with a zero year, month or day
	// ('0000-00-00', '2024-00-10', allowed by sql_mode without
	// NO_ZERO_DATE/NO_ZERO_IN_DATE) and for invalid dates ('2024-02-30',
	// allowed by ALLOW_INVALID_DATES).
	ZeroDate string `yaml:"zero_date"`
	// ZeroDatetime is the same policy for DATETIME values.
	ZeroDatetime string `yaml:"zero_datetime"`
	// ZeroTimestamp is the same policy for TIMESTAMP values
	// ('0000-00-00 00:00:00').
	ZeroTimestamp string `yaml:"zero_timestamp"`
}

// Type policies.
const (
	// TypeError stops with an error (default).
	TypeError = "error"
	// TypeToNull writes NULL; in a NOT NULL column (which Iceberg holds as a
	// required field) it writes what TypeToEpoch writes.
	TypeToNull = "to_null"
	// TypeToEpoch writes 1970-01-01 (00:00:00, UTC for TIMESTAMP).
	TypeToEpoch = "to_epoch"
)

var typePolicies = []string{TypeError, TypeToNull, TypeToEpoch}

type typeKey struct {
	path string
	v    *string
}

// keys are the keys of the types: section, in file order.
func (t *Types) keys() []typeKey {
	return []typeKey{{"types.zero_date", &t.ZeroDate}, {"types.zero_datetime", &t.ZeroDatetime}, {"types.zero_timestamp", &t.ZeroTimestamp}}
}

func (c *Config) applyTypesDefaults() {
	for _, k := range c.Types.keys() {
		path, v := k.path, k.v
		*v = strings.ToLower(strings.TrimSpace(*v))
		switch *v {
		case "":
			if !c.explicit(path) {
				*v = TypeError
			}
		case "null", "tonull", "to-null":
			*v = TypeToNull
		case "epoch", "toepoch", "to-epoch":
			*v = TypeToEpoch
		}
	}
}

func (p *problems) types() {
	for _, k := range p.c.Types.keys() {
		path, v := k.path, k.v
		if p.c.meta != nil && p.c.meta.lines[path] > 0 && !p.c.meta.set[path] {
			// "zero_date: null" is YAML's null, which means "not set".
			p.add(path, `%s is written as a bare null, which YAML reads as "no value": write to_null (or "null" in quotes) to store NULL, or remove the key for the default %s`, path, TypeError)
			continue
		}
		p.enum(path, *v, typePolicies)
	}
}
