package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMessagesEnqueueUnique: messages enqueue stores a message; with --unique-key a second
// message under the key is skipped, naming the holder (text and JSON), and peek shows the key;
// --unique-by-payload skips the same payload; conflicting flags are a usage error.
func TestMessagesEnqueueUnique(t *testing.T) {
	s := startSilo(t)
	if out := ok(t, s, "", "messages", "enqueue", "cli-unique", "jobs", "k1", "--id", "a", "--payload", `{"n":1}`, "--unique-key", "report-7"); out != "enqueued message a\n" {
		t.Fatalf("first enqueue printed %q", out)
	}
	if out := ok(t, s, "", "messages", "enqueue", "cli-unique", "jobs", "k1", "--id", "b", "--unique-key", "report-7", "--unique-for", "1h"); !strings.Contains(out, "skipped message b as a duplicate: message a holds") {
		t.Fatalf("duplicate printed %q", out)
	}
	var res struct {
		ID          string `json:"id"`
		Created     bool   `json:"created"`
		DuplicateOf string `json:"duplicate_of"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", "-o", "json", "messages", "enqueue", "cli-unique", "jobs", "k1", "--id", "c", "--unique-key", "report-7")), &res); err != nil || res.ID != "c" || res.Created || res.DuplicateOf != "a" {
		t.Fatalf("duplicate as JSON: %+v (%v)", res, err)
	}
	if f := strings.Fields(lineOf(ok(t, s, "", "queues", "peek", "cli-unique", "jobs", "k1"), "a ")); len(f) != 10 || f[7] != "report-7" {
		t.Fatalf("peek: row of a %q", f)
	}
	if out := ok(t, s, "", "messages", "enqueue", "cli-unique", "jobs", "k1", "--id", "p1", "--payload", `[1]`, "--unique-by-payload"); out != "enqueued message p1\n" {
		t.Fatalf("by payload printed %q", out)
	}
	if out := ok(t, s, "", "messages", "enqueue", "cli-unique", "jobs", "k1", "--id", "p2", "--payload", `[1]`, "--unique-by-payload"); !strings.Contains(out, "duplicate: message p1 holds") {
		t.Fatalf("the same payload printed %q", out)
	}
	for _, args := range [][]string{
		{"messages", "enqueue", "ns", "q"},
		{"messages", "enqueue", "ns", "q", "k", "--unique-key", "u", "--unique-by-payload"},
		{"messages", "enqueue", "ns", "q", "k", "--unique-for", "1h"},
	} {
		if r := cli(t, nil, "", args...); r.code != 2 {
			t.Errorf("orrery %q: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}
