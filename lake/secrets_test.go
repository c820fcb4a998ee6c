package lake

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync/config"
)

// TestRESTErrorsHideTheURIPassword: a catalog.rest.uri that carries a user
// and password (HTTP basic authentication) never shows the password in an
// error.
func TestRESTErrorsHideTheURIPassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: the catalog cannot be reached
	const secret = "uri-pass-secret"
	cfg, err := config.Parse([]byte(fmt.Sprintf("source:\n  user: u\n  server_id: 1\n  include: [\"a.*\"]\n"+
		"warehouse:\n  location: %s\ncatalog:\n  type: rest\n  rest:\n    uri: http://admin:%s@%s\n", t.TempDir(), secret, addr)), "")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := Open(context.Background(), OptionsFrom(cfg), slog.New(slog.DiscardHandler))
	if err == nil {
		lk.Close()
		t.Fatal("a REST catalog that does not answer opened")
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "connect to the REST catalog at http://redacted@"+addr) {
		t.Errorf("error %q: want the URI without its password", err)
	}
}
