package main

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// libraryLog routes what libraries print with the standard log package
// (iceberg-go reports best-effort cleanups that way) into the daemon's
// structured log, as warnings. The deletion of a replaced metadata file
// that is already gone is expected with a REST catalog, whose server
// deletes it first: that one is logged at debug level.
type libraryLog struct{ log *slog.Logger }

func (l libraryLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "old metadata file") && strings.Contains(msg, "does not exist") {
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, msg, "from", "iceberg-go")
	return len(p), nil
}

// routeLibraryLog sends the standard logger's output to logger.
func routeLibraryLog(logger *slog.Logger) {
	log.SetFlags(0)
	log.SetOutput(libraryLog{logger})
}
