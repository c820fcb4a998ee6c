package lake

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lease"
)

// A holder paused between the UPDATE and the COMMIT of a catalog commit
// keeps the row lock of the table it commits to. PostgreSQL must end that
// session within a third of lease.ttl, so that a standby's commit to the
// same table (the lease record, a fencing commit) goes through instead of
// waiting for the paused process. Seen in TestTwoDaemonsOnePipeline: a
// standby that began to fence a SIGSTOP'd holder's tables waited for over
// a minute.
func TestPausedCatalogSessionReleasesItsLocks(t *testing.T) {
	pg, err := testenv.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the lakes closed their pools.
	t.Cleanup(func() { pg.Stop() })
	if err := pg.CreateDatabase("cat"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := loadConfig(t, filepath.Join(dir, "p.yaml"), fmt.Sprintf(
		"pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %s\ncatalog:\n  sql:\n    driver: postgres\n    dsn: %s\nlease:\n  ttl: 3s\n",
		filepath.Join(dir, "warehouse"), pg.DSN("cat")))
	ctx := context.Background()
	holderStore := openLake(t, cfg).LeaseStore()
	v, err := holderStore.Swap(ctx, "", lease.Record{Holder: holder("a"), Token: 1})
	if err != nil {
		t.Fatal(err)
	}

	// The paused holder: a session of cdcsync's configuration that
	// updated the catalog's rows and then stopped.
	opts := OptionsFrom(cfg)
	pc, err := pgConnConfig(&opts, &reach{})
	if err != nil {
		t.Fatal(err)
	}
	paused, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer paused.Close(ctx)
	tx, err := paused.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := tx.Exec(ctx, "UPDATE iceberg_tables SET metadata_location = metadata_location"); err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("lock the catalog's rows: %v (%d rows)", err, tag.RowsAffected())
	}

	// The standby takes the lease over.
	start := time.Now()
	swapCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := openLake(t, cfg).LeaseStore().Swap(swapCtx, v, lease.Record{Holder: holder("b"), Token: 2}); err != nil {
		t.Fatalf("the standby's swap after %s: %v; a paused session's row lock blocks it", time.Since(start).Round(time.Millisecond), err)
	}
	took := time.Since(start)
	t.Logf("the standby's swap waited %s for the paused session", took.Round(time.Millisecond))
	if took < 500*time.Millisecond || took > 5*time.Second {
		t.Errorf("the standby's swap took %s, want the session bound of %s", took, pgIdleInTxTimeout(cfg.Lease.TTL.Duration))
	}
	// The paused holder's transaction did not survive.
	if err := tx.Commit(ctx); err == nil {
		t.Error("the paused session's COMMIT succeeded after its bound, want it ended by the server")
	}
	got, _, err := holderStore.Load(ctx)
	if err != nil || got.Token != 2 {
		t.Fatalf("lease record after the takeover: %+v %v, want token 2", got, err)
	}
}
