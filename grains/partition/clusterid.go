package partition

// ClusterID is the id of the cluster the silo store records (persistence.SiloStore.ClusterID);
// 0 while the silo belongs to none.
func (h *Host) ClusterID() uint64 { return h.store.ClusterID() }
