package persistence

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// decodeStream decodes stream fed as the chunks cut at the offsets in cuts, returning the
// records and the first error (of a feed or of finish).
func decodeStream(stream []byte, cuts []int) (records [][2][]byte, err error) {
	dec := snapshotDecoder{maxKey: 64, maxValue: 256}
	collect := func(key, value []byte) error {
		records = append(records, [2][]byte{bytes.Clone(key), bytes.Clone(value)})
		return nil
	}
	from := 0
	for _, c := range append(cuts, len(stream)) {
		c = min(max(c, from), len(stream))
		if err := dec.feed(stream[from:c], collect); err != nil {
			return records, err
		}
		from = c
	}
	return records, dec.finish()
}

// FuzzSnapshotDecoder: a snapshot stream, which arrives from another silo in chunks cut
// anywhere, decodes to the same records and the same verdict however it is cut; the decoder
// never panics and never yields a key or value beyond its bounds; and the records of a stream
// it accepts, encoded again (lengths as minimal varints), decode to the same number of records
// in no more bytes.
func FuzzSnapshotDecoder(f *testing.F) {
	valid := []byte{snapshotFormat}
	for _, kv := range [][2]string{{"s/acme/a", "v1"}, {"q/acme/b", ""}, {"x", string(make([]byte, 200))}} {
		valid = binary.AppendUvarint(valid, uint64(len(kv[0])))
		valid = append(valid, kv[0]...)
		valid = binary.AppendUvarint(valid, uint64(len(kv[1])))
		valid = append(valid, kv[1]...)
	}
	f.Add(valid, uint16(3), uint16(9))
	f.Add([]byte{snapshotFormat}, uint16(0), uint16(1))
	f.Add([]byte{snapshotFormat, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, uint16(2), uint16(5))
	f.Add([]byte{snapshotFormat + 1}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, stream []byte, cut1, cut2 uint16) {
		whole, wholeErr := decodeStream(stream, nil)
		cut, cutErr := decodeStream(stream, []int{int(cut1), int(cut1) + int(cut2)})
		if (wholeErr == nil) != (cutErr == nil) {
			t.Fatalf("whole: %v; cut at %d and %d: %v", wholeErr, cut1, int(cut1)+int(cut2), cutErr)
		}
		if wholeErr != nil {
			return
		}
		if len(whole) != len(cut) {
			t.Fatalf("whole: %d records; cut: %d", len(whole), len(cut))
		}
		encoded := []byte{snapshotFormat}
		for i, r := range whole {
			if !bytes.Equal(r[0], cut[i][0]) || !bytes.Equal(r[1], cut[i][1]) {
				t.Fatalf("record %d differs between the whole and the cut stream", i)
			}
			if len(r[0]) == 0 || len(r[0]) > 64 || len(r[1]) > 256 {
				t.Fatalf("record %d is out of bounds: key %d bytes, value %d bytes", i, len(r[0]), len(r[1]))
			}
			encoded = binary.AppendUvarint(encoded, uint64(len(r[0])))
			encoded = append(encoded, r[0]...)
			encoded = binary.AppendUvarint(encoded, uint64(len(r[1])))
			encoded = append(encoded, r[1]...)
		}
		again, err := decodeStream(encoded, nil)
		if err != nil || len(again) != len(whole) || len(encoded) > len(stream) {
			t.Fatalf("the records of an accepted stream, encoded again, decode to %d records (%v), want %d", len(again), err, len(whole))
		}
	})
}
