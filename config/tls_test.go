package config

import "testing"

// TestTLSModeChecks: a CA file or server name the mode would not check is
// refused, rather than looking like a verification.
func TestTLSModeChecks(t *testing.T) {
	for _, tc := range []struct{ tls, want string }{
		{"mode: required\n    ca_file: /ca.pem", `line 8: source.tls.ca_file is set but tls mode required does not check the server's certificate (it only encrypts, like the mysql client's --ssl-mode=REQUIRED): set mode: verify-ca`},
		{"mode: preferred\n    ca_file: /ca.pem", `tls mode preferred does not check the server's certificate`},
		{"mode: verify-ca\n    ca_file: /ca.pem\n    server_name: db", `line 9: source.tls.server_name is set but only tls mode verify-full checks the name in the server's certificate (the mode is verify-ca)`},
		{"mode: required\n    server_name: db", `only tls mode verify-full checks the name`},
	} {
		wantContains(t, parseErr(t, minimal+"  tls:\n    "+tc.tls+"\n"), tc.want)
	}
	parseOK(t, minimal+"  tls:\n    mode: verify-full\n    ca_file: /ca.pem\n    server_name: db\n")
	parseOK(t, minimal+"  tls:\n    mode: required\n    cert_file: /c.pem\n    key_file: /k.pem\n")
}
