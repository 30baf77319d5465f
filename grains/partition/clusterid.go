package partition

// ClusterID is the id of the cluster the silo store records (persistence.SiloStore.ClusterID);
// 0 while the silo belongs to none.
func (h *Host) ClusterID() uint64 { return h.store.ClusterID() }

// SetClusterID records the silo's cluster id in its store, once and synced
// (persistence.SiloStore.SetClusterID).
func (h *Host) SetClusterID(id uint64) error { return h.store.SetClusterID(id) }
