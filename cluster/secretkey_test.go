package cluster

import (
	"bytes"
	"testing"
)

func TestParseSecretKey(t *testing.T) {
	t.Parallel()
	want := []byte("0123456789abcdef0123456789abcdef")
	for _, text := range []string{
		"3031323334353637383961626364656630313233343536373839616263646566\n",
		"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"  MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\n",
	} {
		if key, err := ParseSecretKey([]byte(text)); err != nil || !bytes.Equal(key, want) {
			t.Errorf("%q: %q, %v; want %q", text, key, err, want)
		}
	}
	if key, err := ParseSecretKey([]byte("000102030405060708090a0b0c0d0e0f")); err != nil || len(key) != 16 {
		t.Errorf("16-byte hex key: %x, %v", key, err)
	}
	for _, bad := range []string{"", "short", "303132333435363738396162636465663031323334353637383961626364656630", "!!!!"} {
		if _, err := ParseSecretKey([]byte(bad)); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
