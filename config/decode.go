package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// located renders one problem as "<source>: line N: message", leaving out
// the parts that are unknown.
func located(source string, line int, msg string) error {
	if line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	if source != "" {
		msg = source + ": " + msg
	}
	return errors.New(msg)
}

// decoder turns a yaml.Node tree into a Config by reflection over the yaml
// struct tags. Doing it by hand (rather than with yaml.v3's Decode and
// KnownFields) gives every error its line, its key path and a suggestion,
// lets us report all problems at once, and expands environment variables
// in exactly the values that are decoded.
type decoder struct {
	source string
	lookup func(string) (string, bool)
	lines  map[string]int
	set    map[string]bool
	errs   []error
	// deferred holds, per key, an unset variable in source.password or
	// admin.token: only the commands that use the value report it
	// (Source.ResolvePassword, Admin.ResolveToken), so that tables and cat
	// work without them.
	deferred map[string]error
}

// deferredKeys are the keys whose unset variables are reported by the
// commands that use them rather than when the file loads.
var deferredKeys = map[string]bool{"source.password": true, "admin.token": true}

func newDecoder(source string, lookup func(string) (string, bool)) *decoder {
	return &decoder{source: source, lookup: lookup, lines: map[string]int{}, set: map[string]bool{}, deferred: map[string]error{}}
}

func (d *decoder) errorf(line int, format string, args ...any) {
	d.errs = append(d.errs, located(d.source, line, fmt.Sprintf(format, args...)))
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError rewrites a yaml.v3 parse error into our format.
func (d *decoder) syntaxError(err error, data []byte) error {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	msg += " (the file is not valid YAML"
	if strings.Contains(msg, "cannot start any token") {
		if tab := firstTabIndent(data); tab > 0 && line == 0 {
			line = tab
		}
		msg += "; indent with spaces, YAML does not allow tabs"
	}
	msg += ")"
	return located(d.source, line, msg)
}

// firstTabIndent returns the number of the first line indented with a tab,
// or 0.
func firstTabIndent(data []byte) int {
	for i, l := range strings.Split(string(data), "\n") {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if strings.Contains(indent, "\t") {
			return i + 1
		}
	}
	return 0
}

func (d *decoder) decodeFile(data []byte, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: all defaults, Validate reports what is missing
		}
		return d.syntaxError(err, data)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.errorf(extra.Line, `a second YAML document starts here: a configuration file holds one document; remove the "---" separator and merge the two`)
	} else if !errors.Is(err, io.EOF) {
		return d.syntaxError(err, data)
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	root = deref(root)
	if root.Kind != yaml.MappingNode && !isNull(root) {
		d.errorf(root.Line, "the configuration must be a mapping of keys (pipeline:, source:, warehouse:, ...), but the file holds %s", kindName(root))
		return errors.Join(d.errs...)
	}
	d.decodeValue(root, reflect.ValueOf(c).Elem(), "")
	return errors.Join(d.errs...)
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func where(path string) string {
	if path == "" {
		return "at top level"
	}
	return "in " + path
}

var (
	durationType = reflect.TypeOf(Duration{})
	byteSizeType = reflect.TypeOf(ByteSize(0))
)

func (d *decoder) decodeValue(n *yaml.Node, v reflect.Value, path string) {
	n = deref(n)
	if isNull(n) {
		return
	}
	switch v.Type() {
	case durationType:
		s, shown, ok := d.text(n, path, "a duration such as 5s")
		if !ok {
			return
		}
		dur, err := parseDuration(s)
		if err != nil {
			d.errorf(n.Line, "%s: %s is %v", path, shown, err)
			return
		}
		v.Set(reflect.ValueOf(dur))
		return
	case byteSizeType:
		s, shown, ok := d.text(n, path, "a byte size such as 128MiB")
		if !ok {
			return
		}
		b, err := parseByteSize(s)
		if err != nil {
			d.errorf(n.Line, "%s: %s is %v", path, shown, err)
			return
		}
		v.SetInt(int64(b))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		// An optional value: nil when the key is absent.
		p := reflect.New(v.Type().Elem())
		d.decodeValue(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.String:
		if s, _, ok := d.text(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		s, shown, ok := d.text(n, path, "true or false")
		if !ok {
			return
		}
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.errorf(n.Line, "%s: %s is not a boolean: write true or false", path, shown)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s, shown, ok := d.text(n, path, "an integer")
		if !ok {
			return
		}
		i, err := strconv.ParseInt(cleanInt(s), 10, v.Type().Bits())
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				d.errorf(n.Line, "%s: %s is out of range", path, shown)
			} else {
				d.errorf(n.Line, "%s: %s is not an integer", path, shown)
			}
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		s, shown, ok := d.text(n, path, "a number")
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(cleanInt(s), v.Type().Bits())
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.errorf(n.Line, "%s: %s is not a number: write a decimal such as 0.2", path, shown)
			return
		}
		v.SetFloat(f)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s, shown, ok := d.text(n, path, "an integer")
		if !ok {
			return
		}
		bits := v.Type().Bits()
		u, err := strconv.ParseUint(cleanInt(s), 10, bits)
		if err != nil {
			maxVal := uint64(1)<<uint(bits) - 1
			if bits == 64 {
				maxVal = ^uint64(0)
			}
			d.errorf(n.Line, "%s: %s is not an integer from 0 to %d", path, shown, maxVal)
			return
		}
		v.SetUint(u)
	default:
		d.errorf(n.Line, "%s: cannot decode a value of Go type %s (a bug in cdcsync)", path, v.Type())
	}
}

// cleanInt allows "200_000" and surrounding spaces.
func cleanInt(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "_", "")
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n.Line, `%s: expected a list, got %s: write one "- item" per line, or [item1, item2]`, path, kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.lines[p] = item.Line
		if !isNull(deref(item)) {
			d.set[p] = true
		}
		d.decodeValue(item, s.Index(i), p)
	}
	v.Set(s)
}

type structInfo struct {
	names []string       // yaml keys in declaration order
	index map[string]int // yaml key -> field index
}

func infoOf(t reflect.Type) structInfo {
	info := structInfo{index: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		info.names = append(info.names, name)
		info.index[name] = i
	}
	return info
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	info := infoOf(v.Type())
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, "%s: expected a mapping with keys such as %s, got %s", path, strings.Join(firstN(info.names, 3), ", "), kindName(n))
		return
	}
	// Merge keys ("<<: *anchor") first, so that explicit keys override them.
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			continue
		}
		val = deref(val)
		switch val.Kind {
		case yaml.MappingNode:
			d.decodeStruct(val, v, path)
		case yaml.SequenceNode:
			for _, m := range val.Content {
				d.decodeStruct(deref(m), v, path)
			}
		default:
			d.errorf(k.Line, "%s: a merge key (<<) needs a mapping or a list of mappings", nonEmpty(path))
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k.Line, "%s: a key must be a plain name, not %s", nonEmpty(path), kindName(k))
			continue
		}
		name := k.Value
		idx, ok := info.index[name]
		if !ok {
			d.unknownKey(k, path, info.names)
			continue
		}
		child := joinPath(path, name)
		if first, dup := seen[name]; dup {
			d.errorf(k.Line, "%s is set twice (first at line %d): remove one of them", child, first)
			continue
		}
		seen[name] = k.Line
		d.lines[child] = k.Line
		if !isNull(deref(val)) {
			d.set[child] = true
		}
		d.decodeValue(val, v.Field(idx), child)
	}
}

func nonEmpty(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (d *decoder) unknownKey(k *yaml.Node, path string, valid []string) {
	name := k.Value
	if s := nearest(name, valid); s != "" {
		d.errorf(k.Line, "unknown key %q %s; did you mean %q?", name, where(path), s)
		return
	}
	if homes := keyHomes(name, path); len(homes) > 0 {
		d.errorf(k.Line, "unknown key %q %s; it belongs %s: move it there", name, where(path), strings.Join(homes, " or "))
		return
	}
	d.errorf(k.Line, "unknown key %q %s; the keys allowed here are %s", name, where(path), strings.Join(valid, ", "))
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// keyHomes lists where else in the configuration a key named name exists,
// e.g. "server_id" written at the top level belongs "in source".
func keyHomes(name, path string) []string {
	norm := normalizeKey(name)
	here := indexRE.ReplaceAllString(path, "[]")
	var homes []string
	var walk func(t reflect.Type, parent string)
	walk = func(t reflect.Type, parent string) {
		info := infoOf(t)
		for _, key := range info.names {
			f := t.Field(info.index[key])
			if normalizeKey(key) == norm && parent != here {
				switch parent {
				case "":
					homes = append(homes, "at top level")
				default:
					homes = append(homes, "in "+strings.ReplaceAll(parent, "[]", " entries"))
				}
			}
			ft := f.Type
			child := joinPath(parent, key)
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				walk(ft.Elem(), child+"[]")
			} else if ft.Kind() == reflect.Struct && ft != durationType {
				walk(ft, child)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return homes
}

func normalizeKey(s string) string {
	return strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(strings.TrimSpace(s)))
}

// nearest returns the candidate closest to name when it is close enough to
// be a plausible typo, else "".
func nearest(name string, candidates []string) string {
	norm := normalizeKey(name)
	best, bestDist := "", 1<<30
	for _, c := range candidates {
		cn := normalizeKey(c)
		if cn == norm || strings.ReplaceAll(cn, "_", "") == strings.ReplaceAll(norm, "_", "") {
			return c
		}
		dist := levenshtein(norm, cn)
		if dist < bestDist {
			best, bestDist = c, dist
		}
	}
	limit := 1
	switch n := len(norm); {
	case n > 8:
		limit = 3
	case n > 4:
		limit = 2
	}
	if bestDist <= limit {
		return best
	}
	return ""
}

// levenshtein is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of adjacent characters each
// cost 1, so "prot" is one edit away from "port".
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// text returns the scalar's value after environment expansion, and how to
// show it in an error: quoted when it was written literally, or as the
// reference it came from when an environment variable supplied it (the
// value of a variable is never printed).
func (d *decoder) text(n *yaml.Node, path, want string) (value, shown string, ok bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, "%s: expected %s, got %s", path, want, kindName(n))
		return "", "", false
	}
	value, fromEnv, ok := d.expand(n, path)
	if !ok {
		return "", "", false
	}
	if fromEnv {
		return value, fmt.Sprintf("the value from %s", quoteShort(n.Value)), true
	}
	return value, quoteShort(value), true
}

func quoteShort(s string) string {
	const max = 60
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "..."
	}
	return strconv.Quote(s)
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces ${NAME} and ${NAME:-default} with the environment's
// values and $$ with $. A "$" followed by anything else stays as it is.
// fromEnv reports whether a variable (or its default) was substituted.
func (d *decoder) expand(n *yaml.Node, path string) (out string, fromEnv, ok bool) {
	s := n.Value
	if !strings.Contains(s, "$") {
		return s, false, true
	}
	var b strings.Builder
	ok = true
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			d.errorf(n.Line, `%s: "${" has no closing "}": close the variable reference, or write "$${" for a literal "${"`, path)
			return "", false, false
		}
		inner := s[i+2 : i+2+end]
		i += 2 + end + 1
		name, def, hasDef := strings.Cut(inner, ":-")
		if !envName.MatchString(name) {
			d.errorf(n.Line, `%s: a "${...}" reference holds an invalid variable name (use letters, digits and "_", not starting with a digit): fix it, or write "$${" for a literal "${"`, path)
			ok = false
			continue
		}
		val, isSet := d.lookup(name)
		if !isSet || (hasDef && val == "") {
			if !hasDef {
				msg := fmt.Sprintf("%s: environment variable %s is not set: export it before starting cdcsync, or give a default with ${%s:-value}", path, name, name)
				if deferredKeys[path] {
					d.deferred[path] = errors.Join(d.deferred[path], located(d.source, n.Line, msg))
					continue
				}
				d.errorf(n.Line, "%s", msg)
				ok = false
				continue
			}
			val = def
		}
		b.WriteString(val)
		fromEnv = true
	}
	if !ok {
		return "", false, false
	}
	if deferredKeys[path] && d.deferred[path] != nil {
		return "", false, true
	}
	return b.String(), fromEnv, true
}
