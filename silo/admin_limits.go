package silo

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/client"
)

// maxLimitsBody bounds the body of PUT /v1/queues/{namespace}/{queue}/limits.
const maxLimitsBody = 4 << 10

// putQueueLimits serves PUT /v1/queues/{namespace}/{queue}/limits with the body
// {"max_leased": K, "per_second": R} (0 or absent: no limit of that kind; not both): it caps
// the queue cluster-wide (client.SetQueueLimits) and answers as GET /v1/queues/{namespace}/{queue}.
func (s *Silo) putQueueLimits(w http.ResponseWriter, r *http.Request) {
	var body struct {
		MaxLeased int `json:"max_leased"`
		PerSecond int `json:"per_second"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxLimitsBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, orrery.Invalid("body", "want {\"max_leased\": K, \"per_second\": R}: %v", err))
		return
	}
	err := s.adminClient(r).SetQueueLimits(r.Context(), r.PathValue("namespace"), r.PathValue("queue"), body.MaxLeased, body.PerSecond)
	s.answerLimits(w, r, err)
}

// deleteQueueLimits serves DELETE /v1/queues/{namespace}/{queue}/limits: it removes the
// queue's limits from every partition (client.RemoveQueueLimits) and answers as GET
// /v1/queues/{namespace}/{queue}.
func (s *Silo) deleteQueueLimits(w http.ResponseWriter, r *http.Request) {
	err := s.adminClient(r).RemoveQueueLimits(r.Context(), r.PathValue("namespace"), r.PathValue("queue"))
	s.answerLimits(w, r, err)
}

// answerLimits answers a change of a queue's limits: its error (naming the partitions not
// reached), or the queue's stats.
func (s *Silo) answerLimits(w http.ResponseWriter, r *http.Request, err error) {
	var missed *client.PartitionsError
	if errors.As(err, &missed) {
		err = orrery.Wrap(orrery.CodeOf(err), err, "%s", missed.Error())
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.queueStats(w, r)
}

// limitsJSON summarizes a queue's limits over its partitions' stats for GET
// /v1/queues/{namespace}/{queue}: the policy (null when no partition holds a share), the sum
// of the partitions' shares and the leases they count now.
func limitsJSON(shares []client.PartitionQueueStats) map[string]any {
	var policy any
	var shareLeased, shareMilli, leasedNow uint64
	capped := 0
	for _, p := range shares {
		share := p.Stats.GetShare()
		if share == nil {
			continue
		}
		capped++
		policy = map[string]any{"max_leased": share.GetPolicy().GetMaxLeased(), "per_second": share.GetPolicy().GetLeasesPerSecond()}
		shareLeased += uint64(share.GetShareLeased())
		shareMilli += share.GetShareMilliPerSecond()
		leasedNow += uint64(p.Stats.GetShareLeasedNow())
	}
	return map[string]any{"policy": policy, "capped_partitions": capped, "share_leased_sum": shareLeased,
		"share_milli_per_second_sum": shareMilli, "leased_now": leasedNow}
}
