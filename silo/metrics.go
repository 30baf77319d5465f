package silo

import (
	"cmp"
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/clockoffset"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/replication"
)

// siloMetrics is a silo's Prometheus registry, served at GET /metrics: its own, never the
// process's default one, since a process may run several silos. Every series of the silo
// carries the label silo (its stable id, cluster.FormatID); per-partition series add partition
// (at most the partition count); per-queue series add namespace and queue, for at most
// MaxMetricsQueues queues of the partitions this silo leads; per-schedule series add schedule,
// only for the ids of Config.MetricsSchedules (at most MaxMetricsSchedules).
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
	// stages holds the stage histogram's series, by engine.Stage.
	stages map[engine.Stage]prometheus.Observer
	// bySchedule holds the series of each schedule of Config.MetricsSchedules.
	bySchedule map[string]scheduleSeries
}

// scheduleSeries are one allow-listed schedule's series.
type scheduleSeries struct {
	enqueued prometheus.Counter
	lateness prometheus.Observer
}

const (
	// MaxMetricsSchedules bounds Config.MetricsSchedules, the schedules with series of their
	// own.
	MaxMetricsSchedules = 100
	// MaxMetricsQueues bounds the queues a silo's /metrics has series for: the deepest of
	// those the partitions it leads hold (visible + leased + delayed + dead-lettered, then by
	// name); orrery_queues_omitted counts the rest.
	MaxMetricsQueues = 100
	// metricsQueuesPerPartition is how many queues a scrape asks each led partition for.
	metricsQueuesPerPartition = MaxMetricsQueues
	// metricsQueueTimeout bounds a scrape's queue counts, asked of the led partitions at once.
	metricsQueueTimeout = 2 * time.Second
)

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
	reg.MustRegister(s.denied.count)
	enqueued := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orrery_partition_occurrences_enqueued_total",
		Help: "Occurrences due commands enqueued on the partition while this silo led it.",
	}, []string{"partition"})
	m.enqueuedByPartition = make([]prometheus.Counter, s.cfg.Partitions)
	for n := range m.enqueuedByPartition {
		m.enqueuedByPartition[n] = enqueued.WithLabelValues(strconv.Itoa(n))
	}
	scheduleEnqueued := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orrery_schedule_occurrences_enqueued_total",
		Help: "Occurrences due commands enqueued for the schedule on partitions this silo led (only schedules of --metrics-schedules).",
	}, []string{"schedule"})
	scheduleLateness := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "orrery_schedule_enqueue_lateness_seconds",
		Help:    "For each occurrence of the schedule enqueued on a partition this silo leads: logged time of the enqueue minus nominal due instant (only schedules of --metrics-schedules).",
		Buckets: latenessSecondsBuckets,
	}, []string{"schedule"})
	m.bySchedule = make(map[string]scheduleSeries, len(s.cfg.MetricsSchedules))
	for _, id := range s.cfg.MetricsSchedules {
		m.bySchedule[id] = scheduleSeries{enqueued: scheduleEnqueued.WithLabelValues(id), lateness: scheduleLateness.WithLabelValues(id)}
	}
	stages := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "orrery_partition_stage_seconds",
		Help: "For each command a partition this silo leads answered after its entry applied, the time it spent in a stage: " +
			"apply (accepted proposal to answer: the Raft rounds), command (arrival to answer), due (a due command's arrival to answer), " +
			"lease (a long poll's queue had a visible message to its answer); and for every entry applied: committed (the entry's logged time, when it was proposed, " +
			"to its hand-over to the state machine) and applied (to the commit of its apply transaction).",
		Buckets: raftSecondsBuckets,
	}, []string{"stage"})
	m.stages = map[engine.Stage]prometheus.Observer{}
	for _, st := range []engine.Stage{engine.StageApply, engine.StageCommand, engine.StageDue, engine.StageLease, engine.StageCommitted, engine.StageApplied} {
		m.stages[st] = stages.WithLabelValues(st.String())
	}
	reg.MustRegister(m.raftPersist, m.raftRound, m.raftEntries, m.enqueueLateness, enqueued, scheduleEnqueued, scheduleLateness, stages, newSiloCollector(s))
	s.host.ObserveRounds(m.observeRound)
	s.host.ObserveStages(m.observeStage)
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

func (m *siloMetrics) observeStage(_ int, stage engine.Stage, took time.Duration) {
	if o := m.stages[stage]; o != nil {
		o.Observe(took.Seconds())
	}
}

func (m *siloMetrics) observeEnqueue(partition int, scheduleID string, lateness time.Duration) {
	m.enqueueLateness.Observe(lateness.Seconds())
	if partition >= 0 && partition < len(m.enqueuedByPartition) {
		m.enqueuedByPartition[partition].Inc()
	}
	if series, ok := m.bySchedule[scheduleID]; ok {
		series.enqueued.Inc()
		series.lateness.Observe(lateness.Seconds())
	}
}

// siloCollector reads, at each scrape, what the silo's parts keep: every partition's Raft
// group as this silo's replica sees it, the commands its grain holds and its due head, the Raft
// transport's and the due coordinator's counters, the store's size on disk, and the depth of
// the queues the partitions this silo leads hold (asked of them, queue.ListQueueStats).
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
	descInconsistencies   = prometheus.NewDesc("orrery_replica_inconsistencies_total", "Replicas of the partition whose state checksum differed from the majority's at a consistency check this silo led.", partitionLabel, nil)
	descRepairs           = prometheus.NewDesc("orrery_replica_repairs_total", "Divergent replicas of the partition rebuilt from this replica's state (they installed it).", partitionLabel, nil)
	descCheckedIndex      = prometheus.NewDesc("orrery_partition_checked_index", "Log index of the last consistency check whose checksum this replica computed (0: none yet).", partitionLabel, nil)
	descDueHead           = prometheus.NewDesc("orrery_partition_due_head_entries", "Due-index entries the partition's grain on this silo holds in memory: those due within a few seconds of its last due scan, at most 4096.", partitionLabel, nil)

	queueLabels         = []string{"namespace", "queue"}
	descQueueVisible    = prometheus.NewDesc("orrery_queue_visible_messages", "Messages of the queue a receive would take now (ended leases included), in the partitions this silo leads.", queueLabels, nil)
	descQueueLeased     = prometheus.NewDesc("orrery_queue_leased_messages", "Messages of the queue under an unexpired lease, in the partitions this silo leads.", queueLabels, nil)
	descQueueDelayed    = prometheus.NewDesc("orrery_queue_delayed_messages", "Messages of the queue visible only later, in the partitions this silo leads.", queueLabels, nil)
	descQueueDead       = prometheus.NewDesc("orrery_queue_dead_letter_messages", "Messages in the queue's dead-letter queue, in the partitions this silo leads.", queueLabels, nil)
	descQueueOldest     = prometheus.NewDesc("orrery_queue_oldest_visible_age_seconds", "How long the queue's longest-visible message has been visible (0: none), in the partitions this silo leads.", queueLabels, nil)
	descQueueIncomplete = prometheus.NewDesc("orrery_queue_counts_incomplete", "1 when a partition's scan budget cut the queue's counts this scrape (they are lower bounds), else 0.", queueLabels, nil)
	descQueuesOmitted   = prometheus.NewDesc("orrery_queues_omitted", "Queues of the partitions this silo leads left without series this scrape: beyond MaxMetricsQueues, or a partition's listing cut by its bound or budget (counted once per such partition).", nil, nil)
	descQueueErrors     = prometheus.NewDesc("orrery_queue_stats_errors", "Partitions led here that did not answer this scrape's queue counts.", nil, nil)

	descRaftnetBatches  = prometheus.NewDesc("orrery_raftnet_batches_sent_total", "Raft message batches sent to other silos.", nil, nil)
	descRaftnetSent     = prometheus.NewDesc("orrery_raftnet_messages_sent_total", "Raft messages sent to other silos.", nil, nil)
	descRaftnetDropped  = prometheus.NewDesc("orrery_raftnet_messages_dropped_total", "Raft messages dropped before sending: outbox full, unknown replica, transport closed.", nil, nil)
	descRaftnetFaulted  = prometheus.NewDesc("orrery_raftnet_messages_faulted_total", "Raft and snapshot messages dropped by injected faults.", nil, nil)
	descRaftnetReceived = prometheus.NewDesc("orrery_raftnet_messages_received_total", "Raft messages received from other silos.", nil, nil)

	descStoreDisk    = prometheus.NewDesc("orrery_store_disk_bytes", "Size of the silo store's files.", nil, nil)
	descStoreFree    = prometheus.NewDesc("orrery_store_free_disk_bytes", "Free space on the silo store's disk.", nil, nil)
	descStoreRefused = prometheus.NewDesc("orrery_store_refused_commands_total",
		"Commands refused because the silo store's disk was below its free-space floor.", nil, nil)
	descStoreWrittenKeys = prometheus.NewDesc("orrery_store_written_keys_total",
		"Writes the silo store made since it opened: the sets and deletes of the partitions' applies (part=\"state\", applied marks included, a key set twice in one apply counted twice) and the Raft rounds' appends (part=\"raft_log\": entries, hard states).", []string{"part"}, nil)
	descStoreWrittenBytes = prometheus.NewDesc("orrery_store_written_bytes_total",
		"Bytes of keys and values the silo store wrote since it opened, as orrery_store_written_keys_total counts them, before the store's own copies (write-ahead log, flushes, compactions).", []string{"part"}, nil)

	descCoordRounds   = prometheus.NewDesc("orrery_due_coordinator_rounds_total", "Partition services of the due coordinator.", nil, nil)
	descCoordScans    = prometheus.NewDesc("orrery_due_coordinator_scans_total", "ScanDue calls of the due coordinator.", nil, nil)
	descCoordCommands = prometheus.NewDesc("orrery_due_coordinator_commands_total", "Due commands sent, retries included.", nil, nil)
	descCoordRefs     = prometheus.NewDesc("orrery_due_coordinator_refs_dispatched_total", "Due refs sent in commands.", nil, nil)
	descCoordStale    = prometheus.NewDesc("orrery_due_coordinator_stale_total", "Refs answered with a stale token (the expected outcome of a race).", nil, nil)
	descCoordSkipped  = prometheus.NewDesc("orrery_due_coordinator_refs_skipped_total", "Refs that failed for a lasting reason and were put on backoff.", nil, nil)
	descCoordRetries  = prometheus.NewDesc("orrery_due_coordinator_retries_total", "Due commands repeated with the same command id.", nil, nil)
	descCoordErrors   = prometheus.NewDesc("orrery_due_coordinator_errors_total", "Failed rounds and unexpected per-ref failures.", nil, nil)
	descCoordOwned    = prometheus.NewDesc("orrery_due_coordinator_partitions", "Partitions the due coordinator serves (those this silo leads).", nil, nil)

	descLate            = prometheus.NewDesc("orrery_due_late_records", "Schedules and sagas of a partition this silo leads that are due longer ago than the late-after bound and not emitted.", partitionLabel, nil)
	descFailing         = prometheus.NewDesc("orrery_due_failing_records", "Schedules and sagas of a partition this silo leads whose emits keep failing (on backoff).", partitionLabel, nil)
	descLivenessChanges = prometheus.NewDesc("orrery_due_liveness_changes_total", "Times a due record became late or failing, or recovered, as this silo's due coordinator reported it.", nil, nil)
	descNoQuorum        = prometheus.NewDesc("orrery_partition_without_quorum", "1 when this silo's replica of the partition has seen no leader for longer than the late-after bound, else 0.", partitionLabel, nil)
	descQuorumChanges   = prometheus.NewDesc("orrery_partition_quorum_changes_total", "Times a partition hosted here was reported without quorum, or with a leader again.", nil, nil)
	descMemberRejoins   = prometheus.NewDesc("orrery_member_rejoins_total", "Times this silo rejoined its cluster under a new member id because the cluster no longer accepted the previous one (after a pause or a network cut).", nil, nil)
	descOtherBuilds     = prometheus.NewDesc("orrery_silos_with_other_build", "Live silos whose build (zone rules release, cron evaluator version) differs from this silo's: an unfinished rolling upgrade.", nil, nil)
	descMemberRejoining = prometheus.NewDesc("orrery_member_rejoining", "1 while this silo rejoins its cluster under a new member id.", nil, nil)

	descClockOffset      = prometheus.NewDesc("orrery_clock_offset_seconds", "The live peer silo's wall clock minus this silo's, as last measured (positive: the peer is ahead).", []string{"peer"}, nil)
	descClockUncertainty = prometheus.NewDesc("orrery_clock_offset_uncertainty_seconds", "The uncertainty of orrery_clock_offset_seconds: half the probe's round trip.", []string{"peer"}, nil)
	descClockMaxOffset   = prometheus.NewDesc("orrery_clock_max_offset_seconds", "The largest magnitude of this silo's fresh clock offsets from its live peers (0: none measured).", nil, nil)
	descClockUnfit       = prometheus.NewDesc("orrery_clock_unfit", "1 while this silo's clock is beyond --max-clock-offset from a strict majority of the silos it sees: it leads no partition and is not ready; else 0.", nil, nil)
)

func newSiloCollector(s *Silo) *siloCollector { return &siloCollector{s: s} }

// Describe implements prometheus.Collector.
func (c *siloCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descLeader, descTerm, descCommitIndex, descAppliedIndex, descVoters, descLearners,
		descPendingProposals, descQueuedCommands, descLeaderTransitions, descDueHead, descInconsistencies, descRepairs, descCheckedIndex,
		descQueueVisible, descQueueLeased, descQueueDelayed, descQueueDead, descQueueOldest, descQueueIncomplete,
		descQueuesOmitted, descQueueErrors,
		descRaftnetBatches, descRaftnetSent, descRaftnetDropped, descRaftnetFaulted, descRaftnetReceived,
		descStoreDisk, descStoreFree, descStoreRefused, descStoreWrittenKeys, descStoreWrittenBytes,
		descCoordRounds, descCoordScans, descCoordCommands, descCoordRefs, descCoordStale,
		descCoordSkipped, descCoordRetries, descCoordErrors, descCoordOwned,
		descLate, descFailing, descLivenessChanges, descNoQuorum, descQuorumChanges, descMemberRejoins, descMemberRejoining, descOtherBuilds,
		descClockOffset, descClockUncertainty, descClockMaxOffset, descClockUnfit,
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
		gauge(descDueHead, float64(s.host.DueHeadEntries(n)), p)
		consistency := s.host.Consistency(n)
		counter(descInconsistencies, consistency.Inconsistencies, p)
		counter(descRepairs, consistency.Repairs, p)
		gauge(descCheckedIndex, float64(consistency.Own.Index), p)
		_, without := s.quorum.without(n)
		gauge(descNoQuorum, boolGauge(without), p)
	}
	counter(descQuorumChanges, s.quorum.stateChanges())
	counter(descMemberRejoins, uint64(s.Rejoins()))
	gauge(descMemberRejoining, boolGauge(s.Rejoining()))
	others := 0
	for _, build := range s.siloBuilds() {
		if build != Build() {
			others++
		}
	}
	gauge(descOtherBuilds, float64(others))
	for id, p := range s.offsets.Peers() {
		if p.Fresh {
			gauge(descClockOffset, p.Estimate.Offset.Seconds(), cluster.FormatID(id))
			gauge(descClockUncertainty, p.Estimate.Uncertainty.Seconds(), cluster.FormatID(id))
		}
	}
	verdict := s.offsets.Verdict()
	gauge(descClockMaxOffset, math.Abs(verdict.Largest.Seconds()))
	gauge(descClockUnfit, boolGauge(verdict.Fitness == clockoffset.Unfit))
	c.collectQueues(gauge)
	if m := s.member(); m != nil {
		rs := m.raft.Stats()
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
	counter(descStoreRefused, s.host.RefusedBelowFloor())
	written := s.host.Written()
	counter(descStoreWrittenKeys, written.StateKeys, "state")
	counter(descStoreWrittenKeys, written.LogKeys, "raft_log")
	counter(descStoreWrittenBytes, written.StateBytes, "state")
	counter(descStoreWrittenBytes, written.LogBytes, "raft_log")
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
		counter(descLivenessChanges, cs.LivenessChanges)
		for _, p := range cs.Partitions {
			gauge(descLate, float64(p.LateRecords), strconv.Itoa(p.Partition))
			gauge(descFailing, float64(p.FailingRecords), strconv.Itoa(p.Partition))
		}
	}
}

// boolGauge is 1 for true, 0 for false.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// queueDepth is one queue's counts summed over the partitions this silo leads.
type queueDepth struct {
	namespace, queue               string
	visible, leased, delayed, dead uint64
	oldestAge                      time.Duration
	incomplete                     bool
}

func (d *queueDepth) total() uint64 { return d.visible + d.leased + d.delayed + d.dead }

// collectQueues asks each partition this silo leads for its queues' counts, at once and within
// metricsQueueTimeout, and reports the MaxMetricsQueues deepest.
func (c *siloCollector) collectQueues(gauge func(*prometheus.Desc, float64, ...string)) {
	owned := c.s.Owned()
	ctx, cancel := context.WithTimeout(context.Background(), metricsQueueTimeout)
	defer cancel()
	type answer struct {
		queues []*orreryv1.QueueStats
		more   bool
		err    error
	}
	answers := make([]answer, len(owned))
	var wg sync.WaitGroup
	for i, n := range owned {
		wg.Go(func() {
			queues, more, err := c.s.client.ListQueueStats(ctx, n, metricsQueuesPerPartition)
			answers[i] = answer{queues, more, err}
		})
	}
	wg.Wait()
	depths := map[[2]string]*queueDepth{}
	omitted, failed := 0, 0
	for _, a := range answers {
		if a.err != nil {
			failed++
			continue
		}
		if a.more {
			omitted++
		}
		for _, q := range a.queues {
			id := [2]string{q.GetNamespace(), q.GetQueue()}
			d := depths[id]
			if d == nil {
				d = &queueDepth{namespace: id[0], queue: id[1]}
				depths[id] = d
			}
			d.visible += q.GetVisible()
			d.leased += q.GetLeased()
			d.delayed += q.GetDelayed()
			d.dead += q.GetDeadLettered()
			d.incomplete = d.incomplete || !q.GetComplete()
			if at := q.GetOldestVisibleAtUnixMicros(); at != 0 {
				d.oldestAge = max(d.oldestAge, time.Duration(q.GetLoggedTimeUnixMicros()-at)*time.Microsecond)
			}
		}
	}
	sorted := slices.SortedFunc(maps.Values(depths), func(a, b *queueDepth) int {
		if a.total() != b.total() {
			return cmp.Compare(b.total(), a.total())
		}
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.queue, b.queue))
	})
	if len(sorted) > MaxMetricsQueues {
		omitted += len(sorted) - MaxMetricsQueues
		sorted = sorted[:MaxMetricsQueues]
	}
	for _, d := range sorted {
		incomplete := 0.0
		if d.incomplete {
			incomplete = 1
		}
		gauge(descQueueVisible, float64(d.visible), d.namespace, d.queue)
		gauge(descQueueLeased, float64(d.leased), d.namespace, d.queue)
		gauge(descQueueDelayed, float64(d.delayed), d.namespace, d.queue)
		gauge(descQueueDead, float64(d.dead), d.namespace, d.queue)
		gauge(descQueueOldest, d.oldestAge.Seconds(), d.namespace, d.queue)
		gauge(descQueueIncomplete, incomplete, d.namespace, d.queue)
	}
	gauge(descQueuesOmitted, float64(omitted))
	gauge(descQueueErrors, float64(failed))
}
