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

// TestChurnHandlerDemotesAPeersConnectionChurn: protoactor's records about failed connections
// and requests to a peer reach the wrapped handler at DEBUG with their own level kept, none
// reaches a handler above DEBUG, and other records pass unchanged.
func TestChurnHandlerDemotesAPeersConnectionChurn(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	handler := NewChurnHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	system := actor.NewActorSystem(LoggerOption(handler, slog.LevelWarn))
	for _, msg := range ChurnMessages {
		system.Logger().Error(msg, slog.String("address", "10.0.0.9:40000"), slog.Any("error", "connection refused"))
	}
	system.Logger().Error("other failure", slog.String("address", "10.0.0.9:40000"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(ChurnMessages)+1 {
		t.Fatalf("want %d lines, got %q", len(ChurnMessages)+1, buf.String())
	}
	for i, msg := range ChurnMessages {
		if want := `level=DEBUG msg="` + msg + `"`; !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "logged_level=ERROR") || !strings.Contains(lines[i], "lib=protoactor") {
			t.Errorf("line %d %q lacks %q and logged_level=ERROR", i, lines[i], want)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `level=ERROR msg="other failure"`) {
		t.Errorf("another record changed: %q", last)
	}
	buf.Reset()
	quiet := NewChurnHandler(slog.NewTextHandler(&buf, nil)) // INFO and above
	slog.New(quiet).Error(EndpointLostMessage, "address", "10.0.0.9:40000")
	if buf.Len() != 0 {
		t.Fatalf("a demoted record passed an INFO handler: %q", buf.String())
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
