package actors

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultLogLevel is the level below which protoactor's (and memberlist's) records are dropped
// unless a caller asks for more. protoactor logs every topology change, endpoint and activation
// at INFO, which floods tests and silo logs.
const DefaultLogLevel = slog.LevelWarn

// LevelHandler is a slog.Handler that drops records below a minimum level and hands the rest
// to the wrapped handler (which may filter further).
type LevelHandler struct {
	minLevel slog.Leveler
	next     slog.Handler
}

// NewLevelHandler wraps next so that only records at minLevel or above reach it. A nil next
// means slog.Default().Handler(); a nil minLevel means DefaultLogLevel.
func NewLevelHandler(minLevel slog.Leveler, next slog.Handler) *LevelHandler {
	if next == nil {
		next = slog.Default().Handler()
	}
	if minLevel == nil {
		minLevel = DefaultLogLevel
	}
	return &LevelHandler{minLevel: minLevel, next: next}
}

// Enabled reports whether level passes both the minimum and the wrapped handler.
func (h *LevelHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.minLevel.Level() && h.next.Enabled(ctx, level)
}

// Handle passes the record to the wrapped handler.
func (h *LevelHandler) Handle(ctx context.Context, record slog.Record) error {
	return h.next.Handle(ctx, record)
}

// WithAttrs returns a LevelHandler whose wrapped handler carries attrs.
func (h *LevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LevelHandler{minLevel: h.minLevel, next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a LevelHandler whose wrapped handler opens the group.
func (h *LevelHandler) WithGroup(name string) slog.Handler {
	return &LevelHandler{minLevel: h.minLevel, next: h.next.WithGroup(name)}
}

// LoggerOption returns the actor-system option that routes protoactor's logger to handler
// (nil: slog.Default().Handler() at the time the actor system is created), keeping only records
// at minLevel or above (nil: DefaultLogLevel). Every record carries lib=protoactor and the actor
// system id. Without it protoactor logs colored INFO lines to stderr.
func LoggerOption(handler slog.Handler, minLevel slog.Leveler) actor.ConfigOption {
	return actor.WithLoggerFactory(func(system *actor.ActorSystem) *slog.Logger {
		return slog.New(NewLevelHandler(minLevel, handler)).With(
			slog.String("lib", "protoactor"),
			slog.String("system", system.ID),
		)
	})
}
