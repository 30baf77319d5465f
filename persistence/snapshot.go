package persistence

import (
	"encoding/binary"
	"io"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
)

// MaxSnapshotChunkBytes bounds one chunk of a StateSnapshot. It equals
// replication.MaxSnapshotChunkBytes (persistence does not import replication; a test of
// partition checks that the two agree).
const MaxSnapshotChunkBytes = 1 << 20

// snapshotFormat is the first byte of a snapshot's stream: the version of its encoding.
const snapshotFormat = 1

// Chunks is a snapshot's stream as Install reads it: Next returns the chunks in order, io.EOF
// after the last one, or the error that broke the stream.
type Chunks interface {
	Next() ([]byte, error)
}

// StateSnapshot is a consistent read of a partition's whole state and its applied mark: one
// Badger read transaction at the version last applied when it began, held until Close, so
// applies and installs that commit meanwhile do not show in it (and compaction keeps what it
// reads).
//
// Its stream is the format byte (1), then every state key of the partition in ascending order
// with its value, each as
//
//	uvarint(len(key)) key uvarint(len(value)) value
//
// (keys without the partition's prefix). Next cuts the stream into chunks of at most
// MaxSnapshotChunkBytes; a record may span chunks. The applied mark does not travel in the
// stream: the caller sends it beside (Mark), and Install takes it as its argument.
//
// A StateSnapshot is safe for use by one goroutine at a time; Close may be called from any.
type StateSnapshot struct {
	state  *PartitionState
	at     uint64
	txn    *badger.Txn
	prefix []byte // d/<n>/<gen>/ of the generation read
	mark   AppliedMark

	mu        sync.Mutex
	next      []byte // the store key the next read starts at
	pending   []byte // encoded stream not yet returned
	exhausted bool   // every key is in pending
	closed    bool
}

// Snapshot begins a consistent read of the partition's state as last applied (see
// StateSnapshot). The caller must Close it.
func (p *PartitionState) Snapshot() (*StateSnapshot, error) {
	s := p.store
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	at := s.versions.beginRead(true)
	txn := s.db.NewTransactionAt(at, false)
	// The mark and the generation are read in the same transaction as the keys, so the three
	// agree whatever commits meanwhile.
	mark, gen, err := p.load(txn)
	if err != nil {
		txn.Discard()
		s.versions.endRead(at)
		return nil, err
	}
	prefix := generationPrefix(p.n, gen)
	return &StateSnapshot{
		state: p, at: at, txn: txn, prefix: prefix, mark: mark,
		next: prefix, pending: []byte{snapshotFormat},
	}, nil
}

// Mark is the applied mark of the state the snapshot reads.
func (r *StateSnapshot) Mark() AppliedMark { return r.mark }

// Next returns the next chunk of the stream (at most MaxSnapshotChunkBytes), or io.EOF after
// the last one. It fails once the snapshot or its store is closed.
func (r *StateSnapshot) Next() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, orrery.Errorf(orrery.CodeInternal, "partition %d: snapshot read after Close", r.state.n)
	}
	for len(r.pending) < MaxSnapshotChunkBytes && !r.exhausted {
		if err := r.read(); err != nil {
			return nil, err
		}
	}
	if len(r.pending) == 0 {
		return nil, io.EOF
	}
	n := min(len(r.pending), MaxSnapshotChunkBytes)
	chunk := append([]byte(nil), r.pending[:n]...)
	r.pending = append(r.pending[:0], r.pending[n:]...)
	return chunk, nil
}

// read encodes keys from r.next on until pending holds a chunk or the keys end.
func (r *StateSnapshot) read() error {
	s := r.state.store
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	it := r.txn.NewIterator(badger.IteratorOptions{Prefix: r.prefix})
	defer it.Close()
	for it.Seek(r.next); it.Valid(); it.Next() {
		item := it.Item()
		if len(r.pending) >= MaxSnapshotChunkBytes {
			r.next = item.KeyCopy(nil)
			return nil
		}
		key := item.Key()[len(r.prefix):]
		r.pending = binary.AppendUvarint(r.pending, uint64(len(key)))
		r.pending = append(r.pending, key...)
		err := item.Value(func(value []byte) error {
			r.pending = binary.AppendUvarint(r.pending, uint64(len(value)))
			r.pending = append(r.pending, value...)
			return nil
		})
		if err != nil {
			return orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: snapshot: read the value of %q", r.state.n, item.Key())
		}
	}
	r.exhausted = true
	return nil
}

// Close releases the read. Closing twice is not an error.
func (r *StateSnapshot) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.txn.Discard()
		r.state.store.versions.endRead(r.at)
	}
	return nil
}

// snapshotDecoder decodes a snapshot's stream as its chunks arrive.
type snapshotDecoder struct {
	started  bool
	buf      []byte // the bytes of an incomplete record
	maxKey   int
	maxValue int64
}

// feed decodes chunk, calling fn for every record it completes (key and value are valid only
// during the call).
func (d *snapshotDecoder) feed(chunk []byte, fn func(key, value []byte) error) error {
	d.buf = append(d.buf, chunk...)
	if !d.started {
		if len(d.buf) == 0 {
			return nil
		}
		if d.buf[0] != snapshotFormat {
			return orrery.Errorf(orrery.CodeInternal, "snapshot stream of format %d, want %d", d.buf[0], snapshotFormat)
		}
		d.buf, d.started = d.buf[1:], true
	}
	rest := d.buf
	for {
		key, value, n, err := d.record(rest)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if err := fn(key, value); err != nil {
			return err
		}
		rest = rest[n:]
	}
	d.buf = append([]byte(nil), rest...)
	return nil
}

// record decodes the record at the start of b; n is 0 when b holds only part of it.
func (d *snapshotDecoder) record(b []byte) (key, value []byte, n int, err error) {
	keyLen, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, 0, d.varintError(k)
	}
	if keyLen == 0 || keyLen > uint64(d.maxKey) {
		return nil, nil, 0, orrery.Errorf(orrery.CodeInternal, "snapshot stream: a key of %d bytes (1 to %d)", keyLen, d.maxKey)
	}
	if uint64(len(b)-k) < keyLen {
		return nil, nil, 0, nil
	}
	key = b[k : k+int(keyLen)]
	b = b[k+int(keyLen):]
	valueLen, v := binary.Uvarint(b)
	if v <= 0 {
		return nil, nil, 0, d.varintError(v)
	}
	if valueLen > uint64(d.maxValue) {
		return nil, nil, 0, orrery.Errorf(orrery.CodeInternal, "snapshot stream: a value of %d bytes under %q; the largest is %d", valueLen, key, d.maxValue)
	}
	if uint64(len(b)-v) < valueLen {
		return nil, nil, 0, nil
	}
	return key, b[v : v+int(valueLen)], k + int(keyLen) + v + int(valueLen), nil
}

// varintError is nil for a length cut off by the chunk's end (n == 0), an error otherwise.
func (d *snapshotDecoder) varintError(n int) error {
	if n == 0 {
		return nil
	}
	return orrery.Errorf(orrery.CodeInternal, "snapshot stream: a length overflows 64 bits")
}

// finish checks that the stream ended at a record's end.
func (d *snapshotDecoder) finish() error {
	if !d.started {
		return orrery.Errorf(orrery.CodeInternal, "snapshot stream ended before its format byte")
	}
	if len(d.buf) > 0 {
		return orrery.Errorf(orrery.CodeInternal, "snapshot stream ended inside a record (%d bytes left)", len(d.buf))
	}
	return nil
}
