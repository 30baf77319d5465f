package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// ApplyPause pauses queue (m.namespace, m.queue) in this partition: from this apply on, its
// receives lease nothing (ApplyReceive returns no message) until ApplyResume. Enqueues and the
// leases already held are not affected. The pause record names principal, the logged time and
// the optional reason; pausing a paused queue keeps the first record and reports changed
// false.
func ApplyPause(v kv.View, principal string, m *orreryv1.PauseQueue, loggedNowMicros int64) (*orreryv1.QueuePauseResult, error) {
	if m == nil {
		return nil, orrery.Invalid("", "pause_queue is required")
	}
	if err := validateQueue(m.GetNamespace(), m.GetQueue()); err != nil {
		return nil, err
	}
	if err := input.Reason("reason", m.GetReason()); err != nil {
		return nil, err
	}
	pause, err := LoadPause(v, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	if pause != nil {
		return &orreryv1.QueuePauseResult{Pause: pause}, nil
	}
	pause = &orreryv1.QueuePause{Namespace: m.GetNamespace(), Queue: m.GetQueue(), PausedBy: principal,
		PausedAtUnixMicros: loggedNowMicros, Reason: m.GetReason()}
	if _, err := record.Store(v, keys.QueuePauseKey(m.GetNamespace(), m.GetQueue()), pause); err != nil {
		return nil, err
	}
	return &orreryv1.QueuePauseResult{Changed: true, Pause: pause}, nil
}

// ApplyResume ends the pause of queue (m.namespace, m.queue) in this partition; resuming a
// queue that is not paused reports changed false. Its waiting receives are woken by the
// deletion of the pause record (the engine's recorder).
func ApplyResume(v kv.View, m *orreryv1.ResumeQueue) (*orreryv1.QueuePauseResult, error) {
	if m == nil {
		return nil, orrery.Invalid("", "resume_queue is required")
	}
	if err := validateQueue(m.GetNamespace(), m.GetQueue()); err != nil {
		return nil, err
	}
	pause, err := LoadPause(v, m.GetNamespace(), m.GetQueue())
	if err != nil || pause == nil {
		return &orreryv1.QueuePauseResult{}, err
	}
	if err := v.Delete(keys.QueuePauseKey(m.GetNamespace(), m.GetQueue())); err != nil {
		return nil, err
	}
	return &orreryv1.QueuePauseResult{Changed: true}, nil
}

// LoadPause returns the pause record of queue (namespace, queue) in this partition, or nil
// when it is not paused.
func LoadPause(v kv.Reader, namespace, queue string) (*orreryv1.QueuePause, error) {
	pause := &orreryv1.QueuePause{}
	found, err := record.Load(v, keys.QueuePauseKey(namespace, queue), pause)
	if err != nil || !found {
		return nil, err
	}
	return pause, nil
}

// paused reports whether queue (namespace, queue) is paused in this partition.
func paused(v kv.Reader, namespace, queue string) (bool, error) {
	_, found, err := v.Get(keys.QueuePauseKey(namespace, queue))
	return found, err
}

// validateQueue checks the namespace and queue a pause or resume names (a dead-letter queue
// may be paused).
func validateQueue(namespace, queue string) error {
	if err := input.Name("namespace", namespace, input.MaxNamespaceBytes); err != nil {
		return err
	}
	return input.QueueName("queue", queue, true)
}
