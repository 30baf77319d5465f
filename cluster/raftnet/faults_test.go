package raftnet

import (
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

func TestParseFaults(t *testing.T) {
	f, err := ParseFaults(" drop:2,3 ; delay:4=200ms,5=1s ")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.String(), "drop:2,3;delay:4=200ms,5=1s"; got != want {
		t.Fatalf("parsed %q, want %q", got, want)
	}
	for _, tc := range []struct {
		self, peer uint64
		cut        bool
		delay      time.Duration
	}{
		{1, 2, true, 0}, {1, 3, true, 0}, {1, 4, false, 200 * time.Millisecond}, {1, 6, false, 0},
		{2, 6, true, 0}, {4, 6, false, 200 * time.Millisecond}, {5, 4, false, time.Second},
	} {
		if cut, delay := f.between(tc.self, tc.peer); cut != tc.cut || delay != tc.delay {
			t.Errorf("between(%d, %d) = %v, %v; want %v, %v", tc.self, tc.peer, cut, delay, tc.cut, tc.delay)
		}
	}
	f.Heal(2, 4)
	if got := f.String(); got != "drop:3;delay:5=1s" {
		t.Fatalf("after Heal(2, 4): %q", got)
	}
	f.HealAll()
	if got := f.String(); got != "" {
		t.Fatalf("after HealAll: %q", got)
	}
	if f, err := ParseFaults(""); err != nil || f.String() != "" {
		t.Fatalf("empty spec: %v %q", err, f.String())
	}
	var none *Faults
	if cut, delay := none.between(1, 2); cut || delay != 0 {
		t.Fatal("a nil Faults has faults")
	}
}

func TestParseFaultsRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"drop", "drop:", "drop:x", "drop:0", "delay:2", "delay:2=soon", "delay:2=-1s", "cut:2", "delay:=1s"} {
		_, err := ParseFaults(spec)
		if orrery.CodeOf(err) != orrery.CodeValidation {
			t.Errorf("ParseFaults(%q) = %v, want a Validation error", spec, err)
			continue
		}
		if e := orrery.AsError(err); e.Field != FaultsEnv {
			t.Errorf("ParseFaults(%q) names field %q, want %q", spec, e.Field, FaultsEnv)
		}
	}
}

func TestFaultsFromEnv(t *testing.T) {
	t.Setenv(FaultsEnv, "drop:7")
	f, err := FaultsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cut, _ := f.between(1, 7); !cut {
		t.Fatalf("%s=drop:7 does not cut replica 7: %q", FaultsEnv, f.String())
	}
}
