package client

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random version-4 UUID in lower-case canonical form
// ("0f8fad5b-d9cb-469f-a165-70867728950e"): the default command id, the id Enqueue gives a
// message sent without one, and a valid schedule or saga id.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])  // crypto/rand.Read never fails (it aborts the program instead)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}
