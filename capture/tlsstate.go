package capture

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync/config"
)

// TLSState is how the server says a connection is encrypted.
type TLSState struct {
	Version string // e.g. "TLSv1.3"; "" for a plaintext connection
	Cipher  string // e.g. "TLS_AES_256_GCM_SHA384"
}

// Encrypted reports whether the connection uses TLS.
func (s TLSState) Encrypted() bool { return s.Cipher != "" }

// ReadTLSState asks the server how conn is encrypted (its session's
// Ssl_version and Ssl_cipher).
func ReadTLSState(ctx context.Context, conn *client.Conn) (TLSState, error) {
	r, err := connQuery(ctx, conn, tlsStateQuery)
	if err != nil {
		return TLSState{}, fmt.Errorf("read the connection's encryption (%s): %w", tlsStateQuery, err)
	}
	return tlsStateOf(r.Values), nil
}

const tlsStateQuery = "SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')"

func tlsStateOf(rows [][]mysql.FieldValue) TLSState {
	var st TLSState
	for _, row := range rows {
		if len(row) < 2 {
			continue
		}
		v := strings.Clone(connText(row[1]))
		switch strings.ToLower(connText(row[0])) {
		case "ssl_version":
			st.Version = v
		case "ssl_cipher":
			st.Cipher = v
		}
	}
	return st
}

// DescribeTLS says what a connection in state st protects under src's
// tls mode: whether it is encrypted, and what of the server's certificate
// was verified. warn is true for a plaintext connection and for one whose
// certificate was not verified (preferred, required), with the fix in msg.
func DescribeTLS(src *config.Source, st TLSState) (msg string, warn bool) {
	mode := strings.ToLower(strings.TrimSpace(src.TLS.Mode))
	if mode == "" {
		mode = config.TLSDisabled
	}
	if !st.Encrypted() {
		switch mode {
		case config.TLSDisabled:
			return "plaintext (source.tls.mode: disabled): the login and the rows cross the network unencrypted; " +
				"enable TLS on the server and set source.tls.mode: verify-full with ca_file", true
		case config.TLSPreferred:
			return "plaintext: the server offers no TLS, and source.tls.mode: preferred then connects without it; " +
				"enable TLS on the server (ssl_cert, ssl_key), then set source.tls.mode: verify-full with ca_file", true
		}
		return fmt.Sprintf("plaintext, although source.tls.mode is %s", mode), true
	}
	enc := "encrypted (" + st.Cipher + ")"
	if st.Version != "" {
		enc = "encrypted (" + st.Version + ", " + st.Cipher + ")"
	}
	switch mode {
	case config.TLSVerifyCA:
		return enc + ", certificate verified: signed by source.tls.ca_file; its host name is not checked (verify-ca; verify-full checks it too)", false
	case config.TLSVerifyFull:
		name := src.TLS.ServerName
		if name == "" {
			name = src.Host
		}
		return fmt.Sprintf("%s, certificate verified: signed by source.tls.ca_file and issued to %s (verify-full)", enc, name), false
	}
	return fmt.Sprintf("%s, certificate not verified (source.tls.mode: %s): a machine in the middle could pose as the server; "+
		"set source.tls.mode: verify-ca or verify-full with ca_file", enc, mode), true
}
