package actors

import (
	"bytes"
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
