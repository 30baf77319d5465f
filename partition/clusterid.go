package partition

// ClusterID is the id of the cluster the silo store records (persistence.SiloStore.ClusterID);
// 0 while the silo belongs to none.
func (h *Host) ClusterID() uint64 { return h.store.ClusterID() }

// RetiredSilos returns the silos the store records as retired from the cluster
// (persistence.SiloStore.RetiredSilos).
func (h *Host) RetiredSilos() []uint64 { return h.store.RetiredSilos() }

// RecordRetired adds silos to the store's retired record, synced
// (persistence.SiloStore.RecordRetired).
func (h *Host) RecordRetired(silos []uint64) error { return h.store.RecordRetired(silos) }
