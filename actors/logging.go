package actors

import (
	"context"
	"log/slog"
	"slices"

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

// EndpointLostMessage is the message of protoactor's record for a remote connection that ended
// with an error; its "address" attribute is the peer's actor address (host:port).
const EndpointLostMessage = "EndpointWriter lost connection"

// ChurnMessages are the messages of protoactor's records (remote/endpoint_writer.go,
// cluster/gossip_actor.go, cluster/default_context.go, read at the version go.mod requires)
// about a connection to a peer or a request to it that failed because the peer is gone,
// restarting, paused or cut off. protoactor logs them at WARN or ERROR for every connection
// attempt and every request, dozens of lines for one peer killed.
var ChurnMessages = []string{
	EndpointLostMessage,
	"EndpointWriter failed to connect",
	"EndpointWriter failed to create receive stream",
	"sendGossipForMember failed",
	"cluster.RequestFuture failed",
	"Request retried but failed",
}

// ChurnHandler is a slog.Handler that hands protoactor's ChurnMessages records to the wrapped
// handler at DEBUG, keeping the level they were logged at as the attribute "logged_level".
// A silo's membership provider logs the state change behind them once (cluster: "peer silo
// unreachable", "peer silo left", "peer silo joined"), and the calls that fail on them are
// retried or reported by their callers. Every other record passes unchanged.
type ChurnHandler struct {
	next slog.Handler
}

// NewChurnHandler wraps next.
func NewChurnHandler(next slog.Handler) *ChurnHandler { return &ChurnHandler{next: next} }

// Enabled reports whether the wrapped handler handles level. A churn record's level is only
// known in Handle, so Enabled answers for the level it was logged at.
func (h *ChurnHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle demotes a churn record and passes it on if the wrapped handler handles DEBUG; other
// records pass unchanged.
func (h *ChurnHandler) Handle(ctx context.Context, record slog.Record) error {
	if record.Level > slog.LevelDebug && slices.Contains(ChurnMessages, record.Message) {
		if !h.next.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		record = record.Clone()
		record.AddAttrs(slog.String("logged_level", record.Level.String()))
		record.Level = slog.LevelDebug
	}
	return h.next.Handle(ctx, record)
}

// WithAttrs returns a ChurnHandler whose wrapped handler carries attrs.
func (h *ChurnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &ChurnHandler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a ChurnHandler whose wrapped handler opens the group.
func (h *ChurnHandler) WithGroup(name string) slog.Handler {
	return &ChurnHandler{next: h.next.WithGroup(name)}
}

// DemoteHandler is a slog.Handler that hands every record to the wrapped handler at one level
// (Level), whatever level it was logged at, keeping that one as the attribute "logged_level".
// A cluster client wraps its logger in one at DEBUG for the cluster layer (protoactor,
// memberlist, the membership provider): a restart of the silos it talks to makes that layer log
// connection errors the client's own calls retry through, which are noise to an application.
type DemoteHandler struct {
	Level slog.Level
	next  slog.Handler
}

// NewDemoteHandler wraps next so that every record reaches it at level.
func NewDemoteHandler(next slog.Handler, level slog.Level) *DemoteHandler {
	return &DemoteHandler{Level: level, next: next}
}

// Enabled reports whether the wrapped handler handles the demoted level.
func (h *DemoteHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.next.Enabled(ctx, h.Level)
}

// Handle passes the record on at the demoted level.
func (h *DemoteHandler) Handle(ctx context.Context, record slog.Record) error {
	if record.Level != h.Level {
		record = record.Clone()
		record.AddAttrs(slog.String("logged_level", record.Level.String()))
		record.Level = h.Level
	}
	return h.next.Handle(ctx, record)
}

// WithAttrs returns a DemoteHandler whose wrapped handler carries attrs.
func (h *DemoteHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &DemoteHandler{Level: h.Level, next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a DemoteHandler whose wrapped handler opens the group.
func (h *DemoteHandler) WithGroup(name string) slog.Handler {
	return &DemoteHandler{Level: h.Level, next: h.next.WithGroup(name)}
}
