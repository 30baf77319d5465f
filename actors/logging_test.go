package actors

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

func TestLoggerOptionFiltersAndTags(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	handler := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	system := actor.NewActorSystem(LoggerOption(handler, slog.LevelWarn))
	system.Logger().Info("quiet")
	system.Logger().Warn("loud", slog.String("k", "v"))
	out := buf.String()
	if strings.Contains(out, "quiet") {
		t.Fatalf("INFO passed a WARN filter: %s", out)
	}
	for _, want := range []string{"loud", "k=v", "lib=protoactor", "system=" + system.ID} {
		if !strings.Contains(out, want) {
			t.Fatalf("log %q lacks %q", out, want)
		}
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want exactly one line (the actor system's own INFO start line filtered), got %q", out)
	}
}

func TestLevelHandlerGroups(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(NewLevelHandler(slog.LevelInfo, slog.NewTextHandler(&buf, nil))).WithGroup("g").With("a", 1)
	logger.Debug("dropped")
	logger.Info("kept", "b", 2)
	if out := buf.String(); strings.Contains(out, "dropped") || !strings.Contains(out, "g.a=1") || !strings.Contains(out, "g.b=2") {
		t.Fatalf("log %q", out)
	}
}

// TestPeerLossHandlerDemotesALostNonMember: protoactor's lost-connection record is INFO for a
// peer that is not a member (a client that closed) and stays ERROR for a member; other records
// pass unchanged.
func TestPeerLossHandlerDemotesALostNonMember(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	members := map[string]bool{"10.0.0.1:7381": true}
	handler := NewPeerLossHandler(slog.NewTextHandler(&buf, nil), func(a string) bool { return members[a] })
	system := actor.NewActorSystem(LoggerOption(handler, slog.LevelWarn))
	system.Logger().Error(EndpointLostMessage, slog.String("address", "10.0.0.9:40000"), slog.Any("error", "EOF"))
	system.Logger().Error(EndpointLostMessage, slog.String("address", "10.0.0.1:7381"), slog.Any("error", "EOF"))
	system.Logger().Error("other failure", slog.String("address", "10.0.0.9:40000"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines, got %q", buf.String())
	}
	for i, want := range []string{"level=INFO msg=\"" + EndpointLostMessage + "\"", "level=ERROR msg=\"" + EndpointLostMessage + "\"", "level=ERROR msg=\"other failure\""} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "lib=protoactor") {
			t.Errorf("line %d %q lacks %q", i, lines[i], want)
		}
	}
	buf.Reset()
	quiet := NewPeerLossHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), func(string) bool { return false })
	slog.New(quiet).Error(EndpointLostMessage, "address", "10.0.0.9:40000")
	if buf.Len() != 0 {
		t.Fatalf("a demoted record passed a WARN handler: %q", buf.String())
	}
}

// TestDemoteHandlerLogsEveryRecordAtItsLevel: records reach the wrapped handler at the demoted
// level with their own in logged_level, and none reach a handler that drops that level.
func TestDemoteHandlerLogsEveryRecordAtItsLevel(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(NewDemoteHandler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}), slog.LevelDebug))
	logger.Error("lost connection", "lib", "protoactor")
	if got := out.String(); !strings.Contains(got, `level=DEBUG msg="lost connection" lib=protoactor logged_level=ERROR`) {
		t.Fatalf("logged %q", got)
	}
	out.Reset()
	quiet := slog.New(NewDemoteHandler(slog.NewTextHandler(&out, nil), slog.LevelDebug)) // INFO and above
	quiet.Error("lost connection")
	if quiet.Enabled(context.Background(), slog.LevelError) || out.Len() != 0 {
		t.Fatalf("a handler at INFO got a demoted ERROR: %q", out.String())
	}
}
