package cluster

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// ParseSecretKey decodes a gossip key file (ProviderConfig.SecretKey): the key in hex (32, 48
// or 64 hex digits) or standard base64 (with or without padding) of 16, 24 or 32 bytes,
// surrounding white space ignored. `openssl rand -hex 32` or `openssl rand -base64 32` writes
// one. Every silo and client of a cluster needs the same key.
func ParseSecretKey(data []byte) ([]byte, error) {
	text := string(bytes.TrimSpace(data))
	if key, err := hex.DecodeString(text); err == nil && validKeyLength(len(key)) {
		return key, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if key, err := enc.DecodeString(text); err == nil && validKeyLength(len(key)) {
			return key, nil
		}
	}
	return nil, fmt.Errorf("gossip key: want 16, 24 or 32 bytes in hex or base64, got %d characters that decode to neither", len(text))
}

func validKeyLength(n int) bool { return n == 16 || n == 24 || n == 32 }
