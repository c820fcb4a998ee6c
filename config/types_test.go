package config

import "testing"

// A secret is removed where a library echoes it as a value; where it
// occurs within words (a common word as a password), the message is
// withheld rather than have its surroundings show the secret.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ text, secret, want string }{
		{"dial tcp: lookup db: no such host", "s3cr3t-pw", "dial tcp: lookup db: no such host"},
		{"open postgres://cdc:s3cr3t-pw@db:5432/cat failed", "s3cr3t-pw", "open postgres://cdc:[redacted]@db:5432/cat failed"},
		{"bad dsn password=s3cr3t-pw host=db", "s3cr3t-pw", "bad dsn password=[redacted] host=db"},
		{`{"client_secret":"s3cr3t-pw"}`, "s3cr3t-pw", `{"client_secret":"[redacted]"}`},
		{"the MySQL Server does not support TLS", "MySQL", "(the message is withheld: it contains a secret)"},
		{"x s3cr3t-pw y", "s3cr3t-pw", "(the message is withheld: it contains a secret)"},
		{"a b", "a", "a b"},
	} {
		if got := Redact(c.text, c.secret); got != c.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", c.text, c.secret, got, c.want)
		}
	}
}
