package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// replicaSample is what one silo's replica of one partition reported of its Raft group in one
// GET /v1/partitions (its "replica" row): the silo's own view, read from its Raft node in one
// status call, so term, leader and leads belong together.
type replicaSample struct {
	// Silo is the id of the silo that answered (the table's silo_id), the replica's own.
	Silo      string `json:"silo"`
	Partition int    `json:"partition"`
	// Sent and Received bound the instant the silo read its replica's status.
	Sent     time.Time `json:"sent"`
	Received time.Time `json:"received"`
	Term     uint64    `json:"term"`
	// Leads is the replica's claim to lead the partition in Term (Raft leader that has applied
	// an entry of its term: replication.Status.CanPropose).
	Leads bool `json:"leads"`
	// LeaderSilo is the leader of Term the replica knows, "" when it knows none.
	LeaderSilo   string `json:"leader_silo,omitempty"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
}

// statusSample is a partition's status as one GET /v1/partitions carried it (its "status"
// row): the answering silo asked the partition, through its client, and the partition's grain
// (on the replica that served the inspection, normally the leader) answered with its applied
// mark, the Raft index its state has applied through and the logged time of that state.
type statusSample struct {
	// Via is the id of the silo whose admin endpoint was asked; Served the silo the status
	// names as the one that answered, when it names one.
	Via       string `json:"via"`
	Served    string `json:"served,omitempty"`
	Partition int    `json:"partition"`
	// Sent and Received bound the instant the partition read its status.
	Sent     time.Time `json:"sent"`
	Received time.Time `json:"received"`
	// ActivationEpoch is the Raft term of the grain's activation that answered.
	ActivationEpoch  uint64 `json:"activation_epoch"`
	AppliedIndex     uint64 `json:"applied_index"`
	LoggedTimeMicros int64  `json:"logged_time_unix_micros"`
}

// partitionStatusFields are the fields of a PartitionStatus (protojson, proto names) that
// statusSample keeps.
type partitionStatusFields struct {
	Silo            string      `json:"silo"`
	ActivationEpoch jsonUint64  `json:"activation_epoch"`
	AppliedIndex    jsonUint64  `json:"applied_index"`
	LoggedTime      *jsonUint64 `json:"logged_time_unix_micros"`
}

// raftSamples turns one silo's partition table, read between sent and received, into the
// samples the Raft checkers read. Partitions without a replica on the silo give no replica
// sample; partitions whose status read failed give no status sample.
func raftSamples(table *PartitionTable, sent, received time.Time) ([]replicaSample, []statusSample) {
	var replicas []replicaSample
	var statuses []statusSample
	for _, row := range table.Partitions {
		if v := row.Replica; v != nil {
			s := replicaSample{Silo: table.SiloID, Partition: row.Partition, Sent: sent, Received: received, Term: uint64(v.Term),
				Leads: v.Leads, AppliedIndex: uint64(v.AppliedIndex), CommitIndex: uint64(v.CommitIndex)}
			if v.LeaderSilo != nil {
				s.LeaderSilo = *v.LeaderSilo
			}
			replicas = append(replicas, s)
		}
		if row.Error != "" || len(row.Status) == 0 || string(row.Status) == "null" {
			continue
		}
		var f partitionStatusFields
		if json.Unmarshal(row.Status, &f) != nil || f.LoggedTime == nil || *f.LoggedTime > jsonUint64(1<<63-1) {
			continue
		}
		statuses = append(statuses, statusSample{Via: table.SiloID, Served: f.Silo, Partition: row.Partition, Sent: sent, Received: received,
			ActivationEpoch: uint64(f.ActivationEpoch), AppliedIndex: uint64(f.AppliedIndex), LoggedTimeMicros: int64(*f.LoggedTime)})
	}
	return replicas, statuses
}

// raftSampler reads GET /v1/partitions from every live silo every interval, for the whole
// run, and keeps what each answer says of the partitions' Raft groups and applied states.
// A silo whose previous read has not answered yet (paused, isolated) is skipped that round,
// so that a silo that does not answer costs one request in flight, not a pile.
type raftSampler struct {
	interval, timeout time.Duration
	// addresses lists the admin addresses of the silos running now.
	addresses func() []string

	mu       sync.Mutex
	replicas []replicaSample
	statuses []statusSample
	reads    int // answers decoded
	failures int // reads that errored or timed out
	inFlight map[string]bool

	stop chan struct{}
	done sync.WaitGroup
}

// startRaftSampler starts sampling until stopSampling.
func startRaftSampler(addresses func() []string, interval, timeout time.Duration) *raftSampler {
	s := &raftSampler{interval: interval, timeout: timeout, addresses: addresses, inFlight: map[string]bool{}, stop: make(chan struct{})}
	s.done.Add(1)
	go s.loop()
	return s
}

// loop starts a read of every live silo not still being read, every interval.
func (s *raftSampler) loop() {
	defer s.done.Done()
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		for _, address := range s.addresses() {
			s.mu.Lock()
			busy := s.inFlight[address]
			s.inFlight[address] = true
			s.mu.Unlock()
			if busy {
				continue
			}
			s.done.Add(1)
			go s.read(address)
		}
		select {
		case <-s.stop:
			return
		case <-ticker.C:
		}
	}
}

// read reads one silo's partition table and records its samples.
func (s *raftSampler) read(address string) {
	defer s.done.Done()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	sent := time.Now()
	table, err := ReadPartitions(ctx, address)
	received := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, address)
	if err != nil {
		s.failures++
		return
	}
	s.reads++
	replicas, statuses := raftSamples(table, sent, received)
	s.replicas = append(s.replicas, replicas...)
	s.statuses = append(s.statuses, statuses...)
}

// stopSampling stops the sampler, waits for the reads in flight and returns every sample.
func (s *raftSampler) stopSampling() (replicas []replicaSample, statuses []statusSample, reads, failures int) {
	close(s.stop)
	s.done.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas, s.statuses, s.reads, s.failures
}

// String summarizes what the sampler has read, for the run's log.
func (s *raftSampler) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d partition tables read (%d reads failed): %d replica views, %d partition statuses",
		s.reads, s.failures, len(s.replicas), len(s.statuses))
}

// formatMicros renders a logged time in Unix microseconds as its number and its UTC instant.
func formatMicros(micros int64) string {
	return strconv.FormatInt(micros, 10) + " (" + time.UnixMicro(micros).UTC().Format("15:04:05.000000") + ")"
}
