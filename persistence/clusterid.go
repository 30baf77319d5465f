package persistence

import (
	"encoding/binary"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
)

// ClusterID is the id of the cluster this silo belongs to, as SetClusterID recorded it; 0 while
// the silo has not yet joined or created a cluster.
func (s *SiloStore) ClusterID() uint64 { return s.clusterID.Load() }

// SetClusterID records that the silo belongs to cluster id, in one synced write: when it
// returns nil the id survives a crash. It is written once: setting the id the store already
// records does nothing, and any other id on a store that has one is a Validation error on
// cluster_id naming both ids and the store (a silo never moves to another cluster). Zero is not
// an id.
func (s *SiloStore) SetClusterID(id uint64) error {
	if id == 0 {
		return orrery.Invalid("cluster_id", "must not be zero")
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	switch stored := s.clusterID.Load(); stored {
	case id:
		return nil
	case 0:
	default:
		return orrery.Invalid("cluster_id",
			"the silo store %s belongs to cluster %016x and cannot join cluster %016x", s.dir, stored, id)
	}
	at, err := s.write(func(txn *badger.Txn) error {
		return txn.Set(siloClusterIDKey, binary.BigEndian.AppendUint64(nil, id))
	})
	if err != nil {
		return orrery.Wrap(orrery.CodeOf(err), err, "silo store %s: write the cluster id", s.dir)
	}
	s.published(at)
	s.clusterID.Store(id)
	return nil
}

// loadClusterID reads the stored cluster id, if any, at open.
func (s *SiloStore) loadClusterID(txn *badger.Txn) error {
	value, found, err := getRaw(txn, siloClusterIDKey)
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: read the cluster id", s.dir)
	}
	if !found {
		return nil
	}
	if len(value) != 8 || binary.BigEndian.Uint64(value) == 0 {
		return orrery.Errorf(orrery.CodeInternal, "silo store %s: damaged cluster id %x", s.dir, value)
	}
	s.clusterID.Store(binary.BigEndian.Uint64(value))
	return nil
}
