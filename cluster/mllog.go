package cluster

import (
	"context"
	"log"
	"log/slog"
	"slices"
	"strings"
)

// memberlistLogWriter turns memberlist's log.Logger lines ("[WARN] memberlist: ...") into slog
// records at the matching level.
type memberlistLogWriter struct {
	logger *slog.Logger
}

// newMemberlistLogger returns the *log.Logger to hand to memberlist.
func newMemberlistLogger(logger *slog.Logger) *log.Logger {
	return log.New(memberlistLogWriter{logger: logger}, "", 0)
}

// memberlistChurn are the texts of memberlist's WARN and ERR lines about a peer's connection
// that fails because the peer is gone or this node is shutting down: its failure detector
// reports the peer once (the provider logs "peer silo unreachable"), so they log at DEBUG.
var memberlistChurn = []string{
	"connection refused",
	"use of closed network connection",
	"connection reset by peer",
	"i/o timeout",
}

// Write logs one memberlist line; it never fails.
func (w memberlistLogWriter) Write(line []byte) (int, error) {
	level, msg := parseMemberlistLine(string(line))
	if level > slog.LevelDebug && slices.ContainsFunc(memberlistChurn, func(churn string) bool { return strings.Contains(msg, churn) }) {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if w.logger.Enabled(ctx, level) {
		w.logger.Log(ctx, level, msg, slog.String("lib", "memberlist"))
	}
	return len(line), nil
}

// parseMemberlistLine splits memberlist's "[LEVEL] memberlist: message" convention. Lines
// without a known level tag are INFO.
func parseMemberlistLine(line string) (slog.Level, string) {
	line = strings.TrimSpace(line)
	level := slog.LevelInfo
	for _, tag := range []struct {
		prefix string
		level  slog.Level
	}{
		{"[DEBUG]", slog.LevelDebug},
		{"[INFO]", slog.LevelInfo},
		{"[WARN]", slog.LevelWarn},
		{"[ERR]", slog.LevelError},
		{"[ERROR]", slog.LevelError},
	} {
		if rest, ok := strings.CutPrefix(line, tag.prefix); ok {
			level, line = tag.level, strings.TrimSpace(rest)
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}
