package partition

// AddLearner adds silo as a learner of partition n's group; this replica must lead it
// (replication.Groups.AddLearner).
func (h *Host) AddLearner(n int, silo uint64) error { return h.driver.AddLearner(n, silo) }

// PromoteLearner makes the caught-up learner silo a voter of partition n's group.
func (h *Host) PromoteLearner(n int, silo uint64) error { return h.driver.PromoteLearner(n, silo) }

// RemoveReplica removes silo's replica from partition n's group.
func (h *Host) RemoveReplica(n int, silo uint64) error { return h.driver.RemoveReplica(n, silo) }

// TransferLeadership hands partition n's leadership to silo's replica.
func (h *Host) TransferLeadership(n int, silo uint64) error {
	return h.driver.TransferLeadership(n, silo)
}
