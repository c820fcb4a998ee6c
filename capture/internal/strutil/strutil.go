// Package strutil holds the two string helpers that package capture and
// its DDL parser (capture/ddlparse) both use. It lives under
// capture/internal so that each is written once and nothing outside
// capture depends on it.
package strutil

// Abbreviate returns s cut to its first n bytes, followed by "...", if it
// is longer than n bytes; otherwise s. It is for quoting statements and
// values in messages.
func Abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// AtoiOr returns the non-negative decimal number s, or def when s is
// empty, holds anything but the digits 0-9, or exceeds 1<<30. It reads the
// numbers in a column type's parentheses, such as the 6 of DATETIME(6).
func AtoiOr(s string, def int) int {
	n := 0
	if s == "" {
		return def
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
		if n > 1<<30 {
			return def
		}
	}
	return n
}
