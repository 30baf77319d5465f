package raftnet

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// outbox is what waits to be sent to one replica, in sending order: Raft messages, batched
// into RaftBatches when sent, and snapshot stream messages, sent as they are. Its goroutine
// sends whatever accumulated each time it wakes, after the Faults' delay.
type outbox struct {
	t    *Transport
	to   uint64
	wake chan struct{}

	mu      sync.Mutex
	items   []item
	waiting int // Raft messages among items
}

// item is one message waiting in an outbox.
type item struct {
	queued time.Time
	raft   *orreryv1.RaftGroupMessage
	stream proto.Message
	target *actor.PID // the stream message's destination; nil: Addresses(to)
}

// outbox returns to's outbox, starting it if needed; nil once the transport is closed.
func (t *Transport) outbox(to uint64) *outbox {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosed {
		return nil
	}
	ob := t.outboxes[to]
	if ob == nil {
		ob = &outbox{t: t, to: to, wake: make(chan struct{}, 1)}
		t.outboxes[to] = ob
		t.wg.Add(1)
		go ob.run()
	}
	return ob
}

// pushMessages queues msgs, dropping those beyond the outbox's bound.
func (o *outbox) pushMessages(msgs []*orreryv1.RaftGroupMessage) {
	now := time.Now()
	o.mu.Lock()
	room := max(o.t.cfg.OutboxMessages-o.waiting, 0)
	kept := msgs[:min(room, len(msgs))]
	for _, m := range kept {
		o.items = append(o.items, item{queued: now, raft: m})
	}
	o.waiting += len(kept)
	o.mu.Unlock()
	if dropped := len(msgs) - len(kept); dropped > 0 {
		o.t.dropped.Add(uint64(dropped))
	}
	o.signal()
}

// pushStream queues a snapshot stream message; the streams' windows bound these.
func (o *outbox) pushStream(target *actor.PID, m proto.Message) {
	o.mu.Lock()
	o.items = append(o.items, item{queued: time.Now(), stream: m, target: target})
	o.mu.Unlock()
	o.signal()
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *outbox) run() {
	defer o.t.wg.Done()
	for {
		select {
		case <-o.wake:
		case <-o.t.closed:
			return
		}
		if hook := o.t.beforeFlush; hook != nil {
			hook(o.to)
		}
		for {
			due, wait := o.takeDue(time.Now())
			o.send(due)
			if wait <= 0 {
				break
			}
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-o.t.closed:
				timer.Stop()
				return
			}
		}
	}
}

// takeDue takes the items whose delay has passed by now, and returns how long until the next
// one is due (0 when none is left).
func (o *outbox) takeDue(now time.Time) (due []item, wait time.Duration) {
	_, delay := o.t.cfg.Faults.between(o.t.cfg.Self, o.to)
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for n < len(o.items) && !o.items[n].queued.Add(delay).After(now) {
		if o.items[n].raft != nil {
			o.waiting--
		}
		n++
	}
	due = append([]item(nil), o.items[:n]...)
	o.items = append(o.items[:0], o.items[n:]...)
	if len(o.items) > 0 {
		wait = o.items[0].queued.Add(delay).Sub(now)
	}
	return due, wait
}

// send sends items in order: runs of Raft messages as RaftBatches of at most MaxBatchBytes,
// stream messages one by one. A cut drops them all.
func (o *outbox) send(items []item) {
	if len(items) == 0 {
		return
	}
	t := o.t
	if cut, _ := t.cfg.Faults.between(t.cfg.Self, o.to); cut {
		t.faulted.Add(uint64(len(items)))
		return
	}
	pid, known := t.cfg.Addresses(o.to)
	batch := &orreryv1.RaftBatch{From: t.cfg.Self, To: o.to}
	batchBytes := 0
	flush := func() {
		if len(batch.Messages) == 0 {
			return
		}
		t.cfg.System.Root.Send(pid, batch)
		t.batches.Add(1)
		t.messages.Add(uint64(len(batch.Messages)))
		batch = &orreryv1.RaftBatch{From: t.cfg.Self, To: o.to}
		batchBytes = 0
	}
	for _, it := range items {
		if it.raft == nil {
			flush()
			target := it.target
			if target == nil && known {
				target = pid
			}
			if target != nil {
				t.cfg.System.Root.Send(target, it.stream)
			}
			continue
		}
		if !known {
			t.dropped.Add(1)
			continue
		}
		size := len(it.raft.GetRaft())
		if batchBytes > 0 && batchBytes+size > MaxBatchBytes {
			flush()
		}
		batch.Messages = append(batch.Messages, it.raft)
		batchBytes += size
	}
	flush()
}

// delayLine runs functions in the order they were pushed, each no earlier than its due time,
// on a goroutine of its own.
type delayLine struct {
	closed <-chan struct{}
	wake   chan struct{}

	mu    sync.Mutex
	queue []delayed
}

type delayed struct {
	due time.Time
	run func()
}

func newDelayLine(closed <-chan struct{}, wg *sync.WaitGroup) *delayLine {
	l := &delayLine{closed: closed, wake: make(chan struct{}, 1)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.loop()
	}()
	return l
}

func (l *delayLine) push(due time.Time, run func()) {
	l.mu.Lock()
	l.queue = append(l.queue, delayed{due: due, run: run})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *delayLine) loop() {
	for {
		l.mu.Lock()
		empty := len(l.queue) == 0
		var due time.Time
		if !empty {
			due = l.queue[0].due
		}
		l.mu.Unlock()
		if empty {
			select {
			case <-l.wake:
				continue
			case <-l.closed:
				return
			}
		}
		if wait := time.Until(due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-l.closed:
				timer.Stop()
				return
			}
		}
		l.mu.Lock()
		run := l.queue[0].run
		l.queue = l.queue[1:]
		l.mu.Unlock()
		run()
	}
}
