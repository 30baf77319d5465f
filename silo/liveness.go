package silo

import (
	"context"
	"log/slog"
	"sync"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster"
)

// dueLiveness is what this silo's due coordinator reports of a due record (nil: neither late
// nor failing, or no coordinator yet); partition grains add it to schedule inspections.
func (s *Silo) dueLiveness(_ int, kind orreryv1.DueKind, lane *orreryv1.Lane, id string) *orreryv1.DueLiveness {
	coord := s.coord.Load()
	if coord == nil {
		return nil
	}
	l, ok := coord.LivenessOf(kind, lane, id)
	if !ok {
		return nil
	}
	return &orreryv1.DueLiveness{State: l.State, Reason: l.Reason, DueAtUnixMicros: l.DueAt.UnixMicro(), SinceUnixMicros: l.Since.UnixMicro()}
}

// quorumWatch reports the partitions this silo holds a replica of whose Raft group has had no
// leader, as that replica sees it, for longer than the liveness bound: a log line when one
// loses its quorum so long and when it has a leader again, a gauge and a counter on /metrics,
// and without_quorum_since in /v1/partitions.
type quorumWatch struct {
	lateAfter time.Duration
	log       *slog.Logger

	mu         sync.Mutex
	leaderless map[int]time.Time // partition → since when its replica here has seen no leader
	reported   map[int]bool      // partitions reported without quorum
	changes    uint64
}

func newQuorumWatch(lateAfter time.Duration, log *slog.Logger) *quorumWatch {
	return &quorumWatch{lateAfter: lateAfter, log: log, leaderless: map[int]time.Time{}, reported: map[int]bool{}}
}

// observe takes what partition n's replica here says at now: whether this silo hosts one, and
// the leader it knows (0: none).
func (q *quorumWatch) observe(n int, hosted bool, leader uint64, term uint64, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !hosted || leader != 0 {
		if q.reported[n] {
			q.changes++
			if hosted {
				q.log.Info("partition has a leader again", "partition", n, "leader_silo", cluster.FormatID(leader), "term", term, "without_quorum_for", now.Sub(q.leaderless[n]).Round(time.Millisecond))
			} else {
				q.log.Info("partition no longer hosted here; its quorum is no longer watched", "partition", n)
			}
		}
		delete(q.leaderless, n)
		delete(q.reported, n)
		return
	}
	since, seen := q.leaderless[n]
	if !seen {
		q.leaderless[n] = now
		return
	}
	if !q.reported[n] && now.Sub(since) > q.lateAfter {
		q.reported[n] = true
		q.changes++
		q.log.Warn("partition without quorum: its replica here has seen no leader", "partition", n, "for", now.Sub(since).Round(time.Millisecond), "term", term, "late_after", q.lateAfter)
	}
}

// without returns since when partition n has been reported without quorum (ok false: it is not).
func (q *quorumWatch) without(n int) (since time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.reported[n] {
		return time.Time{}, false
	}
	return q.leaderless[n], true
}

// stateChanges counts the reports (lost quorum, leader again) since the silo started.
func (q *quorumWatch) stateChanges() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changes
}

// quorumCheckEvery is how often the silo looks at its replicas' leaders: a quarter of the
// bound, between 50 ms and a second.
func quorumCheckEvery(lateAfter time.Duration) time.Duration {
	return min(max(lateAfter/4, 50*time.Millisecond), time.Second)
}

// watchQuorum feeds the quorum watch with every partition's status until ctx ends.
func (s *Silo) watchQuorum(ctx context.Context) {
	tick := time.NewTicker(quorumCheckEvery(s.cfg.LateAfter))
	defer tick.Stop()
	for {
		now := time.Now()
		for n := range s.cfg.Partitions {
			st, ok := s.host.Status(n)
			s.quorum.observe(n, ok, st.Leader, st.Term, now)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
