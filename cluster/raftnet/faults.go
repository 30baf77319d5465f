package raftnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
)

// FaultsEnv is the environment variable the silo binary (cmd/silo) reads its transport faults from
// (ParseFaults' spec), so that a test can arm them in a real silo.
const FaultsEnv = "ORRERY_RAFTNET_FAULTS"

// FaultsFileEnv is the silo binary's (cmd/silo) environment variable naming a file it follows for its
// transport faults while it runs (Faults.Follow): a test arms and heals faults in a running
// silo by rewriting the file with a ParseFaults spec.
const FaultsFileEnv = "ORRERY_RAFTNET_FAULTS_FILE"

// Faults are transport failpoints: traffic between this silo and a named replica is dropped
// (Cut) or delayed (Delay), in both directions, until Heal. Naming this silo's own replica id
// applies the fault to all its traffic, which cuts it off from every other silo. A Transport
// checks its Faults for each message it sends or receives, so they may change while it runs.
// The zero value has no faults; a nil *Faults is valid and has none. It is safe for
// concurrent use.
type Faults struct {
	mu    sync.Mutex
	cut   map[uint64]bool
	delay map[uint64]time.Duration
}

// Cut drops all traffic between this silo and each of replicas until Heal.
func (f *Faults) Cut(replicas ...uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut == nil {
		f.cut = map[uint64]bool{}
	}
	for _, r := range replicas {
		f.cut[r] = true
	}
}

// Delay delays all traffic between this silo and replica by d (0 removes the delay).
func (f *Faults) Delay(replica uint64, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.delay == nil {
		f.delay = map[uint64]time.Duration{}
	}
	if d <= 0 {
		delete(f.delay, replica)
		return
	}
	f.delay[replica] = d
}

// Heal removes every fault of each of replicas.
func (f *Faults) Heal(replicas ...uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range replicas {
		delete(f.cut, r)
		delete(f.delay, r)
	}
}

// HealAll removes every fault.
func (f *Faults) HealAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut, f.delay = nil, nil
}

// Replace swaps all of f's faults for a copy of g's, in one step: a message checked meanwhile
// sees either the old set or the new one, never a mix. A nil g leaves no faults.
func (f *Faults) Replace(g *Faults) {
	var cut map[uint64]bool
	var delay map[uint64]time.Duration
	if g != nil {
		g.mu.Lock()
		if len(g.cut) > 0 {
			cut = make(map[uint64]bool, len(g.cut))
			for r := range g.cut {
				cut[r] = true
			}
		}
		if len(g.delay) > 0 {
			delay = make(map[uint64]time.Duration, len(g.delay))
			for r, d := range g.delay {
				delay[r] = d
			}
		}
		g.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut, f.delay = cut, delay
}

// Follow polls the file at path every interval until ctx ends and, each time its content
// differs from the previous poll's, replaces f's faults (Replace) with the ParseFaults spec it
// holds. A file that disappears, or is emptied, leaves no faults; one absent from the first
// poll leaves f's faults as they were until it appears. A spec that does not parse, or a file
// that cannot be read, leaves the faults as they were. After each change Follow calls
// changed (when not nil) with the faults in force and a nil error, or with the error that
// kept them.
func (f *Faults) Follow(ctx context.Context, path string, interval time.Duration, changed func(faults string, err error)) {
	report := func(err error) {
		if changed != nil {
			changed(f.String(), err)
		}
	}
	var last []byte
	present := false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if present {
				present, last = false, nil
				f.HealAll()
				report(nil)
			}
		case err != nil:
			report(fmt.Errorf("read %s: %w", path, err))
		case !present || !bytes.Equal(data, last):
			present, last = true, data
			g, err := ParseFaults(string(data))
			if err != nil {
				report(fmt.Errorf("%s: %w", path, err))
				break
			}
			f.Replace(g)
			report(nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// between reports whether traffic between self and peer is cut, and by how much it is delayed.
func (f *Faults) between(self, peer uint64) (cut bool, delay time.Duration) {
	if f == nil {
		return false, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut[self] || f.cut[peer], max(f.delay[self], f.delay[peer])
}

// String renders the faults in ParseFaults' syntax.
func (f *Faults) String() string {
	if f == nil {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	if len(f.cut) > 0 {
		var ids []string
		for _, r := range sortedKeys(f.cut) {
			ids = append(ids, strconv.FormatUint(r, 10))
		}
		parts = append(parts, "drop:"+strings.Join(ids, ","))
	}
	if len(f.delay) > 0 {
		var rules []string
		for _, r := range sortedKeys(f.delay) {
			rules = append(rules, fmt.Sprintf("%d=%v", r, f.delay[r]))
		}
		parts = append(parts, "delay:"+strings.Join(rules, ","))
	}
	return strings.Join(parts, ";")
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ParseFaults parses a faults spec: clauses separated by ";", each "drop:" followed by
// comma-separated replica ids (Cut), or "delay:" followed by comma-separated id=duration rules
// (Delay, durations as time.ParseDuration reads them). For example "drop:2,3;delay:4=200ms".
// An empty spec has no faults.
func ParseFaults(spec string) (*Faults, error) {
	f := &Faults{}
	for clause := range strings.SplitSeq(spec, ";") {
		clause = strings.TrimSpace(clause)
		if clause == "" {
			continue
		}
		kind, rules, ok := strings.Cut(clause, ":")
		if !ok {
			return nil, orrery.Invalid(FaultsEnv, "clause %q is not drop:<ids> or delay:<id>=<duration>", clause)
		}
		for rule := range strings.SplitSeq(rules, ",") {
			rule = strings.TrimSpace(rule)
			switch strings.TrimSpace(kind) {
			case "drop":
				id, err := parseReplica(rule)
				if err != nil {
					return nil, err
				}
				f.Cut(id)
			case "delay":
				idText, durText, ok := strings.Cut(rule, "=")
				if !ok {
					return nil, orrery.Invalid(FaultsEnv, "delay rule %q is not <id>=<duration>", rule)
				}
				id, err := parseReplica(idText)
				if err != nil {
					return nil, err
				}
				d, err := time.ParseDuration(strings.TrimSpace(durText))
				if err != nil || d <= 0 {
					return nil, orrery.Invalid(FaultsEnv, "delay rule %q: %q is not a positive duration", rule, durText)
				}
				f.Delay(id, d)
			default:
				return nil, orrery.Invalid(FaultsEnv, "clause %q: unknown fault %q (drop or delay)", clause, kind)
			}
		}
	}
	return f, nil
}

func parseReplica(text string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimSpace(text), 10, 64)
	if err != nil || id == 0 {
		return 0, orrery.Invalid(FaultsEnv, "%q is not a replica id (a positive integer)", text)
	}
	return id, nil
}
