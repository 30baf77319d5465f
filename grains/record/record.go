// Package record owns how protobuf records are loaded from and stored into a kv.View: one
// deterministic encoding, so the same state always produces the same bytes.
package record

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

var marshal = proto.MarshalOptions{Deterministic: true}

// Marshal encodes m deterministically.
func Marshal(m proto.Message) ([]byte, error) {
	b, err := marshal.Marshal(m)
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeInternal, err, "encode %T", m)
	}
	return b, nil
}

// Load reads key into m. It reports whether the key existed.
func Load(v kv.Reader, key []byte, m proto.Message) (bool, error) {
	b, found, err := v.Get(key)
	if err != nil || !found {
		return false, err
	}
	return true, Unmarshal(b, m)
}

// Unmarshal decodes a stored record into m.
func Unmarshal(b []byte, m proto.Message) error {
	if err := proto.Unmarshal(b, m); err != nil {
		return orrery.Wrap(orrery.CodeInternal, err, "decode %T", m)
	}
	return nil
}

// Store writes m under key and returns the encoded size.
func Store(v kv.View, key []byte, m proto.Message) (int, error) {
	b, err := Marshal(m)
	if err != nil {
		return 0, err
	}
	return len(b), v.Set(key, b)
}
