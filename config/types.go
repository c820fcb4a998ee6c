package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// redacted is what a non-empty Secret prints as, everywhere.
const redacted = "[redacted]"

// Secret is a string that never prints: String, GoString, Format (every fmt
// verb), MarshalYAML, MarshalJSON, MarshalText and slog's LogValue all give
// "[redacted]", or "" when the secret is empty. Value returns the real string.
type Secret string

// Redact removes secret from text, a message a library produced, in case
// it echoes the secret. An occurrence in the place of a value (after ":",
// "=" or a quote, as in a DSN "user:SECRET@host", "password=SECRET" or
// 'SECRET') becomes "[redacted]"; if the secret still occurs elsewhere
// (within prose, where replacing it would show the secret by its
// surroundings: a password "MySQL" in "the MySQL server ..."), the whole
// text is withheld. Secrets shorter than 4 bytes are not searched for:
// they would match ordinary words, and nothing echoes them as values.
func Redact(text, secret string) string {
	if len(secret) < 4 || !strings.Contains(text, secret) {
		return text
	}
	value := regexp.MustCompile(`([:=]\s*|['"])` + regexp.QuoteMeta(secret) + `(@|['"&;,)\s]|$)`)
	text = value.ReplaceAllString(text, "${1}[redacted]${2}")
	if strings.Contains(text, secret) {
		return "(the message is withheld: it contains a secret)"
	}
	return text
}

// Value returns the secret itself. Call it only where the secret is used.
func (s Secret) Value() string { return string(s) }

func (s Secret) shown() string {
	if s == "" {
		return ""
	}
	return redacted
}

// String returns "[redacted]", or "" when the secret is empty.
func (s Secret) String() string { return s.shown() }

// GoString returns "[redacted]", or "" when the secret is empty, so %#v
// never shows the secret either.
func (s Secret) GoString() string { return s.shown() }

// Format makes every fmt verb (%v, %s, %q, %x, %d, ...) print the redacted
// form; without it a bad verb would print the raw string.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprint(f, strconv.Quote(s.shown()))
		return
	}
	fmt.Fprint(f, s.shown())
}

// MarshalYAML writes "[redacted]" (or "") instead of the secret.
func (s Secret) MarshalYAML() (any, error) { return s.shown(), nil }

// MarshalJSON writes "[redacted]" (or "") instead of the secret.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.shown()) }

// MarshalText writes "[redacted]" (or "") instead of the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.shown()), nil }

// LogValue makes log/slog print "[redacted]" (or "") instead of the secret.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.shown()) }

// Duration wraps time.Duration and decodes Go duration strings such as "5s",
// "250ms", "1m" or "1h30m". A bare number is rejected: the unit is required.
type Duration struct{ time.Duration }

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, fmt.Errorf("not a duration: write a number with a unit, e.g. \"5s\", \"250ms\" or \"1m\"")
	}
	return Duration{d}, nil
}

// MarshalText writes the duration as time.Duration.String does ("1m0s").
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// UnmarshalText parses "5s", "250ms", "1m", ...
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is %w", string(b), err)
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration as a string ("5s").
func (d Duration) MarshalYAML() (any, error) { return d.Duration.String(), nil }

// UnmarshalYAML lets a Duration be decoded by yaml.v3 directly as well.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a duration such as \"5s\"", n.Line)
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is %w", n.Line, n.Value, err)
	}
	*d = v
	return nil
}

// ByteSize is a number of bytes. It decodes an integer (bytes) or a string
// with a unit: "64MiB", "1GiB", "512KiB" (powers of 1024) or "10MB", "1GB"
// (powers of 1000). Units are case-insensitive; B, KB, MB, GB, TB, KiB, MiB,
// GiB and TiB are accepted, and a fraction is allowed ("1.5GiB").
type ByteSize int64

var byteUnits = []struct {
	name string
	mult int64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
	{"b", 1},
}

const byteSizeHelp = `write a number of bytes or a number with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. "128MiB"`

func parseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("not a byte size: %s", byteSizeHelp)
	}
	t = strings.ReplaceAll(t, "_", "")
	// A plain integer (sign allowed: Validate reports negative sizes).
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return ByteSize(n), nil
	}
	lower := strings.ToLower(t)
	for _, u := range byteUnits {
		if !strings.HasSuffix(lower, u.name) {
			continue
		}
		num := strings.TrimSpace(t[:len(t)-len(u.name)])
		if num == "" || strings.ContainsAny(num, "+-eE") {
			break
		}
		if n, err := strconv.ParseInt(num, 10, 64); err == nil {
			if n > math.MaxInt64/u.mult {
				return 0, fmt.Errorf("too large: the maximum is %d bytes", int64(math.MaxInt64))
			}
			return ByteSize(n * u.mult), nil
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			break
		}
		v := f * float64(u.mult)
		if v >= math.MaxInt64 {
			return 0, fmt.Errorf("too large: the maximum is %d bytes", int64(math.MaxInt64))
		}
		return ByteSize(math.Round(v)), nil
	}
	return 0, fmt.Errorf("not a byte size: %s", byteSizeHelp)
}

// Int64 returns the size as a plain number of bytes.
func (b ByteSize) Int64() int64 { return int64(b) }

// String formats the size with the largest binary unit that divides it
// exactly ("128MiB", "1GiB"), else in bytes ("1000B").
func (b ByteSize) String() string {
	if b != 0 {
		for _, u := range []struct {
			name string
			mult int64
		}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if int64(b)%u.mult == 0 {
				return strconv.FormatInt(int64(b)/u.mult, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalText writes the size as String does.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText parses "134217728", "128MiB", "10MB", ...
func (b *ByteSize) UnmarshalText(t []byte) error {
	v, err := parseByteSize(string(t))
	if err != nil {
		return fmt.Errorf("%q is %w", string(t), err)
	}
	*b = v
	return nil
}

// MarshalYAML writes the size as String does ("128MiB").
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// UnmarshalYAML lets a ByteSize be decoded by yaml.v3 directly as well.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a byte size such as \"128MiB\"", n.Line)
	}
	v, err := parseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is %w", n.Line, n.Value, err)
	}
	*b = v
	return nil
}
