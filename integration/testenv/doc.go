// Package testenv starts real servers for cdcsync's integration tests and
// benchmarks: MariaDB with the binlog on and MinIO, each in its own temporary
// directory on a free 127.0.0.1 port. There are no mocks.
//
// The servers are child processes in their own process group. They get
// SIGKILL when the process that started them dies (a test binary killed by
// -timeout included), so a failing test does not leave servers behind;
// Stop shuts them down cleanly and removes the directories this package
// created.
//
// MariaDB.Kill and MariaDB.Restart simulate a server crash and recovery on
// the same data directory and port.
//
// The binaries come from the machine: mariadbd and mariadb-install-db from
// the mariadb-server Debian package, minio built at a pinned version into
// <repo>/.tools/bin. scripts/test.sh installs all of them. When one is
// missing, Start* returns an error saying so; tests must fail on that error
// (t.Fatal), never skip.
//
// Typical use:
//
//	db, err := testenv.StartMariaDB(testenv.MariaDBOptions{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { _ = db.Stop() })
//	// connect cdcsync to db.Addr() as testenv.ReplUser / testenv.ReplPassword
package testenv
