package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stageSeries are the silo histograms a run's stage line reports, in the order of an
// occurrence's life: the due path to the applied enqueue, a due command, the long poll that
// leases it, other commands (configures, acks), and under them all: each command's proposal
// to its answer (apply), each entry's proposal to its hand-over to the state machine
// (committed) and to its applied transaction (applied), and the Raft rounds.
var stageSeries = []struct{ label, family, stage string }{
	{"due→enqueued", "orrery_occurrence_enqueue_lateness_seconds", ""},
	{"due cmd", "orrery_partition_stage_seconds", "due"},
	{"lease", "orrery_partition_stage_seconds", "lease"},
	{"command", "orrery_partition_stage_seconds", "command"},
	{"apply", "orrery_partition_stage_seconds", "apply"},
	{"committed", "orrery_partition_stage_seconds", "committed"},
	{"applied", "orrery_partition_stage_seconds", "applied"},
	{"round", "orrery_raft_round_seconds", ""},
	{"persist", "orrery_raft_persist_seconds", ""},
}

// siloStages reads the silo's /metrics at admin and describes each stage histogram of
// stageSeries as p50/p99 in milliseconds (estimated within the histogram's buckets) with its
// count. A series the silo does not export is left out.
func siloStages(ctx context.Context, admin string) (string, error) {
	families, err := siloMetrics(ctx, admin)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, s := range stageSeries {
		h := findHistogram(families[s.family], s.stage)
		if h == nil || h.GetSampleCount() == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f/%.1f (%d)", s.label,
			bucketQuantile(h, 0.50)*1000, bucketQuantile(h, 0.99)*1000, h.GetSampleCount()))
	}
	return "stages p50/p99 ms (count): " + strings.Join(parts, ", "), nil
}

// findHistogram returns the histogram of family whose stage label is stage ("": the family's
// only series).
func findHistogram(family *dto.MetricFamily, stage string) *dto.Histogram {
	for _, m := range family.GetMetric() {
		if stage == "" {
			return m.GetHistogram()
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "stage" && l.GetValue() == stage {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// bucketQuantile estimates the q-quantile of h in seconds, linearly within the bucket that
// holds it (the upper bound of the last finite bucket when it lies beyond).
func bucketQuantile(h *dto.Histogram, q float64) float64 {
	rank := q * float64(h.GetSampleCount())
	lower, below := 0.0, uint64(0)
	for _, b := range h.GetBucket() {
		if float64(b.GetCumulativeCount()) >= rank {
			in := b.GetCumulativeCount() - below
			if in == 0 {
				return b.GetUpperBound()
			}
			return lower + (b.GetUpperBound()-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = b.GetUpperBound(), b.GetCumulativeCount()
	}
	return lower
}

// siloMetrics reads and parses the silo's /metrics at admin.
func siloMetrics(ctx context.Context, admin string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return families, nil
}

// storeWrites is the silo store's written keys and bytes (orrery_store_written_keys_total and
// orrery_store_written_bytes_total), by part: "state" and "raft_log".
type storeWrites map[string]float64

// siloWrites reads the silo's storeWrites; nil when it cannot (the note then says so).
func siloWrites(ctx context.Context, admin string) storeWrites {
	families, err := siloMetrics(ctx, admin)
	if err != nil {
		return nil
	}
	w := storeWrites{}
	for family, unit := range map[string]string{"orrery_store_written_keys_total": "keys", "orrery_store_written_bytes_total": "bytes"} {
		for _, m := range families[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "part" {
					w[l.GetValue()+" "+unit] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(w) == 0 {
		return nil
	}
	return w
}

// writesNote describes what the store wrote from before to after per occurrence (of
// occurrences), state and Raft log apart.
func writesNote(before, after storeWrites, occurrences int) string {
	if before == nil || after == nil || occurrences <= 0 {
		return "store writes per occurrence unavailable"
	}
	per := func(key string) float64 { return (after[key] - before[key]) / float64(occurrences) }
	return fmt.Sprintf("store writes per occurrence: state %.1f keys / %.0f B, Raft log %.1f keys / %.0f B",
		per("state keys"), per("state bytes"), per("raft_log keys"), per("raft_log bytes"))
}
