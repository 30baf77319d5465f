package partition

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/persistence"
)

// CheckTimeout bounds how long a partition's leader waits for its voters' checksums of one
// CheckConsistency entry; the voters that have not reported by then are named missing.
const CheckTimeout = 30 * time.Second

// ChecksumSender is implemented by a Transport (SetTransport) that carries a replica's
// checksum of its partition state to the group's leader (cluster/raftnet does).
type ChecksumSender interface {
	SendChecksum(to uint64, group int, index uint64, checksum []byte)
}

// Checksum is a replica's SHA-256 of its partition state (the persistence.StateSnapshot
// stream) with every entry up to Index, a CheckConsistency entry, applied.
type Checksum struct {
	Index uint64
	Sum   []byte
}

// Verdict is what a partition's leader concluded from its voters' checksums at one
// CheckConsistency entry.
type Verdict struct {
	Index uint64
	// At is when the leader concluded.
	At time.Time
	// Sums are the checksums that arrived, by replica (silo id).
	Sums map[uint64][]byte
	// Majority is the checksum a strict majority of the voters reported (nil: none did).
	Majority []byte
	// Divergent are the replicas whose checksum differs from the majority's; without a
	// majority, every replica that reported when they disagree.
	Divergent []uint64
	// Missing are the voters whose checksum did not arrive within CheckTimeout.
	Missing []uint64
}

// Consistent reports whether a majority agreed and no replica differed from it.
func (v Verdict) Consistent() bool { return v.Majority != nil && len(v.Divergent) == 0 }

// ConsistencyStatus is partition n's consistency as this silo knows it.
type ConsistencyStatus struct {
	// Own is this replica's last checksum (Index 0: none yet).
	Own Checksum
	// Last is the last verdict this silo reached while leading the partition (Index 0: none).
	Last Verdict
	// Inconsistencies counts the divergent replicas this silo's verdicts named.
	Inconsistencies uint64
	// Repairs counts the rebuilds of divergent replicas from this replica's state that they
	// installed (repair.go); LastRepair is the last rebuild's outcome (Replica 0: none yet).
	Repairs    uint64
	LastRepair Repair
}

// Proto is the last verdict as a PartitionStatus carries it (nil before the first).
func (c ConsistencyStatus) Proto() *orreryv1.ConsistencyCheck {
	v := c.Last
	if v.Index == 0 {
		return nil
	}
	sums := make([]*orreryv1.ReplicaChecksum, 0, len(v.Sums))
	for _, r := range slices.Sorted(maps.Keys(v.Sums)) {
		sums = append(sums, &orreryv1.ReplicaChecksum{Silo: formatReplica(r), Checksum: hex.EncodeToString(v.Sums[r])})
	}
	return &orreryv1.ConsistencyCheck{Index: v.Index, AtUnixMicros: v.At.UnixMicro(), Consistent: v.Consistent(), Checksums: sums,
		Divergent: formatReplicas(v.Divergent), Missing: formatReplicas(v.Missing), Inconsistencies: c.Inconsistencies, Repairs: c.Repairs}
}

// consistency is the host's replica consistency checker (see checksumState).
type consistency struct {
	mu         sync.Mutex
	status     map[int]*ConsistencyStatus
	collecting map[int]*collection
}

// collection is the checksums a leader gathers for one CheckConsistency entry.
type collection struct {
	index  uint64
	voters []uint64
	sums   map[uint64][]byte
	timer  clock.Timer
}

func newConsistency() *consistency {
	return &consistency{status: map[int]*ConsistencyStatus{}, collecting: map[int]*collection{}}
}

// of returns partition n's status, creating it; the caller holds mu.
func (c *consistency) of(n int) *ConsistencyStatus {
	st := c.status[n]
	if st == nil {
		st = &ConsistencyStatus{}
		c.status[n] = st
	}
	return st
}

// Consistency returns partition n's consistency as this silo knows it: its own last checksum
// and, where it led a check, the last verdict.
func (h *Host) Consistency(n int) ConsistencyStatus {
	c := h.checks
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.of(n)
	out := *st
	out.Last.Sums = maps.Clone(st.Last.Sums)
	return out
}

// DivergedKey is the key Diverge writes.
var DivergedKey = []byte("zz/diverged")

// Diverge makes this replica's next apply of partition n also write DivergedKey, which no
// state machine writes: its state then differs from the other replicas', as a nondeterministic
// apply would make it. It exists to test the consistency checker (DivergeEnv).
func (h *Host) Diverge(n int) error {
	m, err := h.machine(n)
	if err != nil {
		return err
	}
	write := func(txn *persistence.Txn) error {
		return txn.Set(DivergedKey, []byte("written behind the state machine"))
	}
	m.tamper.Store(&write)
	return nil
}

// checksumState hashes snap, partition n's state right after it applied the CheckConsistency
// entry at index, and hands the checksum to the group's leader: to this silo's own checker
// when it leads, otherwise through the transport (ChecksumSender). It runs on a goroutine of
// its own and closes snap.
func (h *Host) checksumState(n int, index uint64, snap *persistence.StateSnapshot) {
	defer snap.Close()
	sum, _, err := hashState(snap)
	if err != nil {
		h.log.Warn("consistency check: the partition state did not read", "partition", n, "index", index, "err", err)
		return
	}
	h.checks.mu.Lock()
	h.checks.of(n).Own = Checksum{Index: index, Sum: sum}
	h.checks.mu.Unlock()
	st, ok := h.Status(n)
	switch self := h.SiloID(); {
	case !ok || st.Leader == 0:
	case st.Leader == self:
		h.ChecksumReported(self, n, index, sum)
	default:
		if t := h.transport.t.Load(); t != nil {
			if sender, ok := (*t).(ChecksumSender); ok {
				sender.SendChecksum(st.Leader, n, index, sum)
			}
		}
	}
}

// hashState is the SHA-256 of a state snapshot's stream, and the stream's length in bytes.
func hashState(snap *persistence.StateSnapshot) (sum []byte, size int64, err error) {
	digest := sha256.New()
	for {
		chunk, err := snap.Next()
		if errors.Is(err, io.EOF) {
			return digest.Sum(nil), size, nil
		}
		if err != nil {
			return nil, size, err
		}
		size += int64(len(chunk))
		digest.Write(chunk)
	}
}

// ChecksumReported takes replica from's checksum of partition n at the CheckConsistency entry
// index (its own, or one a transport received). Only the group's leader keeps it; once every
// voter's has arrived, or CheckTimeout after the first, it reaches a verdict.
func (h *Host) ChecksumReported(from uint64, n int, index uint64, sum []byte) {
	st, ok := h.Status(n)
	if !ok || st.Leader != h.SiloID() {
		return
	}
	c := h.checks
	c.mu.Lock()
	col := c.collecting[n]
	if col != nil && index < col.index {
		c.mu.Unlock()
		return // a report of an older check, after its verdict or its successor
	}
	if col == nil || index > col.index {
		if col != nil {
			col.timer.Stop()
		}
		col = &collection{index: index, voters: slices.Clone(st.Voters), sums: map[uint64][]byte{}}
		col.timer = h.cfg.Clock.AfterFunc(CheckTimeout, func() { h.decide(n, index) })
		c.collecting[n] = col
	}
	col.sums[from] = slices.Clone(sum)
	complete := true
	for _, v := range col.voters {
		if _, ok := col.sums[v]; !ok {
			complete = false
		}
	}
	c.mu.Unlock()
	if complete {
		h.decide(n, index)
	}
}

// InconsistencyMessage is the message of the ERROR line a partition's leader logs for each
// replica a consistency check found divergent, with the attributes partition, index and
// replica: a harness that reads silo logs (the chaos run) counts these lines.
const InconsistencyMessage = "replica inconsistency: a replica's partition state differs from the majority's at the same applied index"

// decide concludes the collection of partition n's check at index, if it is still open:
// records the verdict, counts and logs every divergent replica at ERROR
// (InconsistencyMessage), and rebuilds them from the majority's state (repair).
func (h *Host) decide(n int, index uint64) {
	c := h.checks
	c.mu.Lock()
	col := c.collecting[n]
	if col == nil || col.index != index {
		c.mu.Unlock()
		return
	}
	col.timer.Stop()
	delete(c.collecting, n)
	v := verdictOf(col, h.cfg.Clock.Now())
	st := c.of(n)
	st.Last = v
	st.Inconsistencies += uint64(len(v.Divergent))
	c.mu.Unlock()
	switch {
	case len(v.Divergent) > 0:
		for _, r := range v.Divergent {
			h.log.Error(InconsistencyMessage,
				"partition", n, "index", index, "replica", formatReplica(r), "checksum", shortSum(v.Sums[r]), "majority", shortSum(v.Majority),
				"replicas", describeSums(v.Sums), "missing", formatReplicas(v.Missing), "repaired", v.Majority != nil)
		}
		h.repair(n, v)
	case len(v.Missing) > 0:
		h.log.Warn("consistency check incomplete: some replicas did not report their checksum", "partition", n, "index", index,
			"missing", formatReplicas(v.Missing), "replicas", describeSums(v.Sums))
	default:
		h.log.Debug("consistency check: every replica agrees", "partition", n, "index", index, "checksum", shortSum(v.Majority))
	}
}

// verdictOf compares a collection's checksums.
func verdictOf(col *collection, at time.Time) Verdict {
	v := Verdict{Index: col.index, At: at, Sums: col.sums}
	for _, voter := range col.voters {
		if _, ok := col.sums[voter]; !ok {
			v.Missing = append(v.Missing, voter)
		}
	}
	counts := map[string]int{}
	for _, sum := range col.sums {
		counts[string(sum)]++
	}
	for sum, count := range counts {
		if 2*count > len(col.voters) {
			v.Majority = []byte(sum)
		}
	}
	replicas := slices.Sorted(maps.Keys(col.sums))
	for _, r := range replicas {
		if v.Majority != nil && !bytes.Equal(col.sums[r], v.Majority) {
			v.Divergent = append(v.Divergent, r)
		}
	}
	if v.Majority == nil && len(counts) > 1 {
		v.Divergent = replicas
	}
	return v
}

// shortSum is the first 16 hex digits of a checksum, for logs.
func shortSum(sum []byte) string {
	if len(sum) > 8 {
		sum = sum[:8]
	}
	return hex.EncodeToString(sum)
}

// describeSums renders replica=checksum pairs, for logs.
func describeSums(sums map[uint64][]byte) string {
	var b bytes.Buffer
	for i, r := range slices.Sorted(maps.Keys(sums)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(formatReplica(r))
		b.WriteByte('=')
		b.WriteString(shortSum(sums[r]))
	}
	return b.String()
}

// formatReplica renders a replica (silo) id as the 16 hex digits logs and the admin API use.
func formatReplica(id uint64) string { return fmt.Sprintf("%016x", id) }

// formatReplicas renders replica ids, for logs.
func formatReplicas(ids []uint64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = formatReplica(id)
	}
	return out
}
