package silo

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/replication"
)

// siloMetrics is a silo's Prometheus registry, served at GET /metrics: its own, never the
// process's default one, since a process may run several silos. Every series of the silo
// carries the label silo (its stable id, cluster.FormatID); per-partition series add partition.
// Gauges and counters kept elsewhere (the partitions' Raft view, the Raft transport's and the
// due coordinator's counters, the store's size) are read when scraped; the histograms are fed
// by the observers the Host calls (Raft rounds, due enqueues).
type siloMetrics struct {
	registry *prometheus.Registry

	raftPersist         prometheus.Histogram
	raftRound           prometheus.Histogram
	raftEntries         prometheus.Counter
	enqueueLateness     prometheus.Histogram
	enqueuedByPartition []prometheus.Counter
}

// Bucket layouts: Raft persists and rounds from 100 µs to about 3 s, lateness from 1 ms to
// about 2 min.
var (
	raftSecondsBuckets     = prometheus.ExponentialBuckets(0.0001, 2, 16)
	latenessSecondsBuckets = prometheus.ExponentialBuckets(0.001, 2, 18)
)

// newSiloMetrics builds the silo's registry and sets the Host's observers to feed it.
func newSiloMetrics(s *Silo) *siloMetrics {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"silo": cluster.FormatID(s.SiloID())}, registry)
	m := &siloMetrics{
		registry: registry,
		raftPersist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orrery_raft_persist_seconds",
			Help:    "Time of each Raft round's one synced write of every group's entries and hard state (fsync included).",
			Buckets: raftSecondsBuckets,
		}),
		raftRound: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orrery_raft_round_seconds",
			Help:    "Time of each Raft round: persist, send, hand the committed entries to the state machines, advance.",
			Buckets: raftSecondsBuckets,
		}),
		raftEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orrery_raft_persisted_entries_total",
			Help: "Raft log entries persisted by this silo's rounds, every group's.",
		}),
		enqueueLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orrery_occurrence_enqueue_lateness_seconds",
			Help:    "For each occurrence a due command enqueued on a partition this silo leads: the entry's logged time minus the occurrence's nominal due instant.",
			Buckets: latenessSecondsBuckets,
		}),
	}
	enqueued := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orrery_partition_occurrences_enqueued_total",
		Help: "Occurrences due commands enqueued on the partition while this silo led it.",
	}, []string{"partition"})
	m.enqueuedByPartition = make([]prometheus.Counter, s.cfg.Partitions)
	for n := range m.enqueuedByPartition {
		m.enqueuedByPartition[n] = enqueued.WithLabelValues(strconv.Itoa(n))
	}
	reg.MustRegister(m.raftPersist, m.raftRound, m.raftEntries, m.enqueueLateness, enqueued, newSiloCollector(s))
	s.host.ObserveRounds(m.observeRound)
	s.host.ObserveEnqueueLateness(m.observeEnqueue)
	return m
}

// handler serves the registry in the Prometheus exposition formats.
func (m *siloMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (m *siloMetrics) observeRound(rt replication.RoundTiming) {
	if rt.PersistedEntries > 0 || rt.Persist > 0 {
		m.raftPersist.Observe(rt.Persist.Seconds())
	}
	m.raftRound.Observe(rt.Duration.Seconds())
	m.raftEntries.Add(float64(rt.PersistedEntries))
}

func (m *siloMetrics) observeEnqueue(partition int, lateness time.Duration) {
	m.enqueueLateness.Observe(lateness.Seconds())
	if partition >= 0 && partition < len(m.enqueuedByPartition) {
		m.enqueuedByPartition[partition].Inc()
	}
}

// siloCollector reads, at each scrape, what the silo's parts keep: every partition's Raft
// group as this silo's replica sees it, the commands its grain holds, the Raft transport's and
// the due coordinator's counters, and the store's size on disk.
type siloCollector struct {
	s *Silo
}

// Descriptions of the series siloCollector reads at scrape time.
var (
	partitionLabel = []string{"partition"}

	descLeader            = prometheus.NewDesc("orrery_partition_leader", "1 when this silo's replica leads the partition's Raft group, else 0.", partitionLabel, nil)
	descTerm              = prometheus.NewDesc("orrery_partition_term", "The partition's Raft term as this silo's replica knows it.", partitionLabel, nil)
	descCommitIndex       = prometheus.NewDesc("orrery_partition_commit_index", "The highest Raft log index this replica knows committed.", partitionLabel, nil)
	descAppliedIndex      = prometheus.NewDesc("orrery_partition_applied_index", "The Raft log index this replica has applied through.", partitionLabel, nil)
	descVoters            = prometheus.NewDesc("orrery_partition_voters", "Voters in the partition's Raft configuration as of the applied index.", partitionLabel, nil)
	descLearners          = prometheus.NewDesc("orrery_partition_learners", "Learners in the partition's Raft configuration as of the applied index.", partitionLabel, nil)
	descPendingProposals  = prometheus.NewDesc("orrery_partition_pending_proposals", "Proposals this replica made that no round has committed or lost yet.", partitionLabel, nil)
	descQueuedCommands    = prometheus.NewDesc("orrery_partition_queued_commands", "Commands the partition's grain on this silo holds: proposed and not applied, or parked long polls.", partitionLabel, nil)
	descLeaderTransitions = prometheus.NewDesc("orrery_partition_leader_transitions_total", "Times this silo's replica became or stopped being the partition's leader since the group opened here.", partitionLabel, nil)

	descRaftnetBatches  = prometheus.NewDesc("orrery_raftnet_batches_sent_total", "Raft message batches sent to other silos.", nil, nil)
	descRaftnetSent     = prometheus.NewDesc("orrery_raftnet_messages_sent_total", "Raft messages sent to other silos.", nil, nil)
	descRaftnetDropped  = prometheus.NewDesc("orrery_raftnet_messages_dropped_total", "Raft messages dropped before sending: outbox full, unknown replica, transport closed.", nil, nil)
	descRaftnetFaulted  = prometheus.NewDesc("orrery_raftnet_messages_faulted_total", "Raft and snapshot messages dropped by injected faults.", nil, nil)
	descRaftnetReceived = prometheus.NewDesc("orrery_raftnet_messages_received_total", "Raft messages received from other silos.", nil, nil)

	descStoreDisk = prometheus.NewDesc("orrery_store_disk_bytes", "Size of the silo store's files.", nil, nil)
	descStoreFree = prometheus.NewDesc("orrery_store_free_disk_bytes", "Free space on the silo store's disk.", nil, nil)

	descCoordRounds   = prometheus.NewDesc("orrery_due_coordinator_rounds_total", "Partition services of the due coordinator.", nil, nil)
	descCoordScans    = prometheus.NewDesc("orrery_due_coordinator_scans_total", "ScanDue calls of the due coordinator.", nil, nil)
	descCoordCommands = prometheus.NewDesc("orrery_due_coordinator_commands_total", "Due commands sent, retries included.", nil, nil)
	descCoordRefs     = prometheus.NewDesc("orrery_due_coordinator_refs_dispatched_total", "Due refs sent in commands.", nil, nil)
	descCoordStale    = prometheus.NewDesc("orrery_due_coordinator_stale_total", "Refs answered with a stale token (the expected outcome of a race).", nil, nil)
	descCoordSkipped  = prometheus.NewDesc("orrery_due_coordinator_refs_skipped_total", "Refs that failed for a lasting reason and were put on backoff.", nil, nil)
	descCoordRetries  = prometheus.NewDesc("orrery_due_coordinator_retries_total", "Due commands repeated with the same command id.", nil, nil)
	descCoordErrors   = prometheus.NewDesc("orrery_due_coordinator_errors_total", "Failed rounds and unexpected per-ref failures.", nil, nil)
	descCoordOwned    = prometheus.NewDesc("orrery_due_coordinator_partitions", "Partitions the due coordinator serves (those this silo leads).", nil, nil)
)

func newSiloCollector(s *Silo) *siloCollector { return &siloCollector{s: s} }

// Describe implements prometheus.Collector.
func (c *siloCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descLeader, descTerm, descCommitIndex, descAppliedIndex, descVoters, descLearners,
		descPendingProposals, descQueuedCommands, descLeaderTransitions,
		descRaftnetBatches, descRaftnetSent, descRaftnetDropped, descRaftnetFaulted, descRaftnetReceived,
		descStoreDisk, descStoreFree,
		descCoordRounds, descCoordScans, descCoordCommands, descCoordRefs, descCoordStale,
		descCoordSkipped, descCoordRetries, descCoordErrors, descCoordOwned,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *siloCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	self := s.SiloID()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for n := range s.cfg.Partitions {
		st, ok := s.host.Status(n)
		if !ok {
			continue
		}
		p := strconv.Itoa(n)
		leader := 0.0
		if st.Leader == self {
			leader = 1
		}
		gauge(descLeader, leader, p)
		gauge(descTerm, float64(st.Term), p)
		gauge(descCommitIndex, float64(st.CommitIndex), p)
		gauge(descAppliedIndex, float64(st.AppliedIndex), p)
		gauge(descVoters, float64(len(st.Voters)), p)
		gauge(descLearners, float64(len(st.Learners)), p)
		gauge(descPendingProposals, float64(st.PendingProposals), p)
		gauge(descQueuedCommands, float64(s.host.Queued(n)), p)
		counter(descLeaderTransitions, st.LeaderTransitions, p)
	}
	if s.raft != nil {
		rs := s.raft.Stats()
		counter(descRaftnetBatches, rs.Batches)
		counter(descRaftnetSent, rs.Messages)
		counter(descRaftnetDropped, rs.Dropped)
		counter(descRaftnetFaulted, rs.Faulted)
		counter(descRaftnetReceived, rs.Received)
	}
	if size, err := s.host.DiskBytes(); err == nil {
		gauge(descStoreDisk, float64(size))
	} else {
		ch <- prometheus.NewInvalidMetric(descStoreDisk, err)
	}
	if free, err := s.host.FreeDiskBytes(); err == nil {
		gauge(descStoreFree, float64(free))
	} else {
		ch <- prometheus.NewInvalidMetric(descStoreFree, err)
	}
	if coord := s.coord.Load(); coord != nil {
		cs := coord.Stats()
		counter(descCoordRounds, cs.Rounds)
		counter(descCoordScans, cs.Scans)
		counter(descCoordCommands, cs.CommandsSent)
		counter(descCoordRefs, cs.RefsDispatched)
		counter(descCoordStale, cs.StaleIgnored)
		counter(descCoordSkipped, cs.RefsSkipped)
		counter(descCoordRetries, cs.Retries)
		counter(descCoordErrors, cs.Errors)
		gauge(descCoordOwned, float64(len(cs.Partitions)))
	}
}
