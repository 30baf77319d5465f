package queue

import (
	"bytes"
	"strings"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// StatsScanBudget bounds the visibility-index entries one Stats reads (of the queue and of its
// dead-letter queue together), so a queue of any depth answers at once; beyond it the counts
// are lower bounds and QueueStats.complete is false.
const StatsScanBudget = 4096

// Stats counts queue (namespace, queue) in this partition at nowMicros: of the lane with key
// when key is set, of every lane otherwise, every priority band included. Visible messages are
// the index entries at or before now (an ended lease included); entries after now are leased
// or delayed by their message's lease. For one lane the dead-lettered count and the lane's totals come from the
// lane counters (exact), and the scan stops as soon as it has found every message the counters
// hold; for a whole queue the dead-letter queue's index is counted within the same budget. The
// queue's pause record, when it is paused in this partition, its retry policy, when it has
// one, and its share and the leases the share counts, when it is capped here (ApplySetShare),
// come with the counts.
func Stats(v kv.Reader, namespace, queue, key string, nowMicros int64) (*orreryv1.QueueStats, error) {
	if err := input.Name("namespace", namespace, input.MaxNamespaceBytes); err != nil {
		return nil, err
	}
	if err := input.QueueName("queue", queue, false); err != nil {
		return nil, err
	}
	stats, _, err := countQueue(v, namespace, queue, key, nowMicros, StatsScanBudget)
	return stats, err
}

// countQueue is Stats within budget index entries; it returns what is left of the budget.
func countQueue(v kv.Reader, namespace, queue, key string, nowMicros int64, budget int) (*orreryv1.QueueStats, int, error) {
	stats := &orreryv1.QueueStats{LoggedTimeUnixMicros: nowMicros, Complete: true}
	pause, err := LoadPause(v, namespace, queue)
	if err != nil {
		return nil, budget, err
	}
	stats.Pause = pause
	if stats.Retry, err = LoadRetryPolicy(v, namespace, queue); err != nil {
		return nil, budget, err
	}
	if stats.Share, err = LoadShare(v, namespace, queue); err != nil {
		return nil, budget, err
	}
	if stats.Share != nil {
		if stats.ShareLeasedNow, err = countLeased(v, namespace, queue, nowMicros); err != nil {
			return nil, budget, err
		}
	}
	var lanePrefix []byte
	wanted := uint64(0) // for one lane: how many messages the scan must find
	if key != "" {
		if err := input.Name("key", key, input.MaxKeyBytes); err != nil {
			return nil, budget, err
		}
		lane := &orreryv1.Lane{Namespace: namespace, Queue: queue, Key: key}
		counters, err := LoadCounters(v, lane)
		if err != nil {
			return nil, budget, err
		}
		dead, err := LoadCounters(v, DeadLetterLane(lane))
		if err != nil {
			return nil, budget, err
		}
		stats.LaneMessages, stats.LaneBytes, stats.DeadLettered = counters.GetMessages(), counters.GetBytes(), dead.GetMessages()
		lanePrefix = keys.Of(keys.Message, keys.AppendLane(nil, lane))
		wanted = counters.GetMessages()
		if wanted == 0 {
			return stats, budget, nil
		}
	}
	prefix := keys.QueuePrefix(namespace, queue)
	var loadErr error
	err = v.Scan(prefix, kv.PrefixEnd(prefix), func(indexKey, messageKey []byte) (bool, error) {
		if budget == 0 {
			stats.Complete = false
			return false, nil
		}
		budget--
		if _, ok := keys.PriorityBandsQueuePrefix(indexKey); ok {
			return true, nil // the band directory, after every band (priority.go)
		}
		if lanePrefix != nil && !bytes.HasPrefix(messageKey, lanePrefix) {
			return true, nil
		}
		at, err := keys.VisibilityInstant(prefix, indexKey)
		if err != nil {
			loadErr = orrery.Wrap(orrery.CodeInternal, err, "visibility index key %x", bytes.Clone(indexKey))
			return false, nil
		}
		if at <= nowMicros {
			if stats.Visible == 0 || at < stats.OldestVisibleAtUnixMicros { // bands: not in time order
				stats.OldestVisibleAtUnixMicros = at
			}
			stats.Visible++
		} else {
			msg := &orreryv1.QueueMessage{}
			found, err := record.Load(v, messageKey, msg)
			if err != nil || !found {
				loadErr = orrery.Errorf(orrery.CodeInternal, "visibility index entry %x points at no message", bytes.Clone(indexKey))
				return false, nil
			}
			if msg.GetLease() != nil {
				stats.Leased++
			} else {
				stats.Delayed++
			}
		}
		return lanePrefix == nil || stats.Visible+stats.Leased+stats.Delayed < wanted, nil
	})
	if err != nil {
		return nil, budget, err
	}
	if loadErr != nil {
		return nil, budget, loadErr
	}
	if lanePrefix != nil {
		if stats.Visible+stats.Leased+stats.Delayed < wanted {
			stats.Complete = false
		}
		return stats, budget, nil
	}
	deadPrefix := keys.QueuePrefix(namespace, queue+input.DeadLetterSuffix)
	err = v.Scan(deadPrefix, kv.PrefixEnd(deadPrefix), func(indexKey, _ []byte) (bool, error) {
		if _, ok := keys.PriorityBandsQueuePrefix(indexKey); ok {
			return true, nil
		}
		if budget == 0 {
			stats.Complete = false
			return false, nil
		}
		budget--
		stats.DeadLettered++
		return true, nil
	})
	return stats, budget, err
}

// ListQueueStatsBudget bounds the visibility-index entries one ListQueueStats reads, the
// counts of every queue it lists together.
const ListQueueStatsBudget = 4 * StatsScanBudget

// ListQueueStats counts, at nowMicros, up to maxQueues queues holding messages in this
// partition (a queue holding only dead letters included), in the order their first index
// entry is found, each as Stats counts a whole queue, all within ListQueueStatsBudget index
// entries (a queue counted past it is not complete). Finding a queue costs one index seek,
// whatever its depth. more reports queues left out by maxQueues or the budget.
func ListQueueStats(v kv.Reader, nowMicros int64, maxQueues int) (queues []*orreryv1.QueueStats, more bool, err error) {
	budget := ListQueueStatsBudget
	seen := map[string]bool{}
	start, end := keys.Of(keys.Visibility, nil), kv.PrefixEnd(keys.Visibility)
	for {
		var prefix []byte
		err := v.Scan(start, end, func(key, _ []byte) (bool, error) {
			p, ok := keys.VisibilityQueuePrefix(key)
			if !ok {
				p, ok = keys.PriorityBandsQueuePrefix(key)
			}
			if !ok {
				return false, orrery.Errorf(orrery.CodeInternal, "visibility index key %x is malformed", bytes.Clone(key))
			}
			prefix = bytes.Clone(p)
			return false, nil
		})
		if err != nil || prefix == nil {
			return queues, false, err
		}
		start = kv.PrefixEnd(prefix)
		namespace, queue, err := keys.SplitQueuePrefix(prefix)
		if err != nil {
			return nil, false, orrery.Wrap(orrery.CodeInternal, err, "visibility index prefix %x", prefix)
		}
		queue = strings.TrimSuffix(queue, input.DeadLetterSuffix)
		id := string(keys.AppendString(keys.AppendString(nil, namespace), queue))
		if seen[id] {
			continue
		}
		if len(queues) == maxQueues || budget == 0 {
			return queues, true, nil
		}
		seen[id] = true
		var stats *orreryv1.QueueStats
		stats, budget, err = countQueue(v, namespace, queue, "", nowMicros, budget)
		if err != nil {
			return nil, false, err
		}
		stats.Namespace, stats.Queue = namespace, queue
		queues = append(queues, stats)
	}
}
