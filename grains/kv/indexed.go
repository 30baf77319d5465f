package kv

import "bytes"

// DeleteIndexed deletes, in key order and at most maxEntries, the index entries in
// [start, end) together with the record each points at (target maps an index key to its
// record's key). It reports how many entries it deleted and whether more remain in the range.
// Retention uses it with age indexes (a record's key suffixed to the instant it aged from).
func DeleteIndexed(v View, start, end []byte, maxEntries int, target func(indexKey []byte) ([]byte, error)) (deleted int, more bool, err error) {
	var index [][]byte
	err = v.Scan(start, end, func(key, _ []byte) (bool, error) {
		if len(index) == maxEntries {
			more = true
			return false, nil
		}
		index = append(index, bytes.Clone(key))
		return true, nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, key := range index {
		recordKey, err := target(key)
		if err != nil {
			return 0, false, err
		}
		if err := v.Delete(recordKey); err != nil {
			return 0, false, err
		}
		if err := v.Delete(key); err != nil {
			return 0, false, err
		}
	}
	return len(index), more, nil
}
