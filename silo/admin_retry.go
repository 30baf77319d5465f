package silo

import (
	"io"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// maxRetryPolicyBodyBytes bounds a PUT retry-policy body (a RetryPolicy is a few dozen bytes).
const maxRetryPolicyBodyBytes = 4 << 10

// putRetryPolicy serves PUT /v1/queues/{namespace}/{queue}/retry-policy (body: a RetryPolicy
// in protobuf JSON, e.g. {"max_attempts": 5, "initial_backoff_micros": "1000000",
// "max_backoff_micros": "3600000000", "jitter_percent": 20, "on_exhausted": "RETRY_EXHAUSTED_DROP"}):
// it sets the queue's retry policy on every partition (client.SetQueueRetryPolicy) and answers
// {"namespace", "queue", "policy", "partitions"}; when some partitions were not reached the
// error names them (calling again is safe).
func (s *Silo) putRetryPolicy(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRetryPolicyBodyBytes))
	if err != nil {
		writeError(w, orrery.Invalid("body", "unreadable or larger than %d bytes: %v", maxRetryPolicyBodyBytes, err))
		return
	}
	policy := &orreryv1.RetryPolicy{}
	if err := protojson.Unmarshal(body, policy); err != nil {
		writeError(w, orrery.Invalid("body", "is not a retry policy in protobuf JSON: %v", err))
		return
	}
	if _, known := orreryv1.RetryExhausted_name[int32(policy.GetOnExhausted())]; !known {
		writeError(w, orrery.Invalid("policy.on_exhausted", "is not a RetryExhausted value: %d", policy.GetOnExhausted()))
		return
	}
	s.setRetryPolicy(w, r, policy)
}

// deleteRetryPolicy serves DELETE /v1/queues/{namespace}/{queue}/retry-policy: it removes the
// queue's retry policy from every partition and answers like putRetryPolicy (policy null).
func (s *Silo) deleteRetryPolicy(w http.ResponseWriter, r *http.Request) {
	s.setRetryPolicy(w, r, nil)
}

// setRetryPolicy sets (nil: removes) the path's queue's retry policy on every partition.
func (s *Silo) setRetryPolicy(w http.ResponseWriter, r *http.Request, policy *orreryv1.RetryPolicy) {
	namespace, queue := r.PathValue("namespace"), r.PathValue("queue")
	cl := s.adminClient(r)
	if err := partitionsNamed(cl.SetQueueRetryPolicy(r.Context(), namespace, queue, client.MessageRetryOf(policy))); err != nil {
		writeError(w, err)
		return
	}
	var shown any
	if policy != nil {
		shown = protoJSON(client.MessageRetryOf(policy).Proto()) // as the partitions hold it
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": namespace, "queue": queue, "policy": shown, "partitions": cl.Partitions()})
}
