package cluster

import (
	"log/slog"
)

// Fenced is closed once this silo must stop serving for good: the cluster retired it (see
// retired.go). Nothing else fences a member: a member id the cluster no longer accepts is
// reported through Lost, and the silo rejoins under a new one. FenceCause says why.
func (p *Provider) Fenced() <-chan struct{} { return p.fenced }

// FenceCause is the reason Fenced was closed, nil before that.
func (p *Provider) FenceCause() error {
	select {
	case <-p.fenced:
		return p.fenceCause
	default:
		return nil
	}
}

// fence records the first cause and closes Fenced; later causes are ignored.
func (p *Provider) fence(cause error) {
	p.fenceOnce.Do(func() {
		p.fenceCause = cause
		p.logger.Error("member fenced: its silo was retired from the cluster",
			slog.String("member", p.env.selfID), slog.Any("cause", cause))
		close(p.fenced)
		if p.cfg.OnFenced != nil {
			go p.cfg.OnFenced(cause)
		}
	})
}

func (p *Provider) isFenced() bool {
	select {
	case <-p.fenced:
		return true
	default:
		return false
	}
}
