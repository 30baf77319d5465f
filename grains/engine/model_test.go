package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/keys"
)

// TestEveryCommandIsAnsweredExactlyOnce: under random sequences of commands (enqueues,
// receives, long polls and their abandons), applies, lost proposals, refusals, timer firings and time moving on,
// no command is answered twice, the pending bound holds, and once the engine stops every
// command has its one answer; and no long poll leased for nobody: one answered with nothing has
// no receipt, unless its abandon was answered with it (the caller releases what it leased).
// The partition applies under apply version 22 or 23 (long polls carried in entries).
func TestEveryCommandIsAnsweredExactlyOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		version := rapid.SampledFrom([]uint32{batch.ApplyVersionWaitingInEntry - 1, batch.ApplyVersionWaitingInEntry}).Draw(rt, "version")
		h := newHarness(rt, func(c *Config) { c.MaxPending = 8; c.MaxWaiters = 3; c.Applier.ApplyVersion = version })
		h.applier.ApplyVersion = version
		longPolls, abandons := map[string]string{}, map[string][]string{} // command id → who sent it
		sent := 0
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 8).Draw(rt, "event") {
			case 0, 1:
				h.command(fmt.Sprint(sent), request(fmt.Sprint("c", sent), enqueue(fmt.Sprint("m", sent), time.Duration(rapid.IntRange(0, 3).Draw(rt, "delay"))*time.Second)))
				sent++
			case 2:
				h.command(fmt.Sprint(sent), request(fmt.Sprint("c", sent), receive()))
				sent++
			case 3:
				h.command(fmt.Sprint(sent), longPoll(fmt.Sprint("c", sent), time.Duration(rapid.IntRange(1, 5).Draw(rt, "wait"))*time.Second))
				longPolls[fmt.Sprint("c", sent)] = fmt.Sprint(sent)
				sent++
			case 4:
				h.commit()
			case 5: // the log loses its tail: those proposals lost their term
				var lost []Proposal
				for _, e := range h.log {
					lost = append(lost, Proposal{Index: e.index, Term: e.term})
				}
				h.log = nil
				h.step(Lost{Proposals: lost})
			case 6:
				h.now = h.now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "ms")) * time.Millisecond)
				h.step(WaitTimerFired{})
			case 7:
				h.refuse = map[bool]error{true: fmt.Errorf("refused")}[rapid.Bool().Draw(rt, "refuse")]
			case 8: // abandon an earlier command's long poll (or what it was)
				if sent > 0 {
					id := fmt.Sprint("c", rapid.IntRange(0, sent-1).Draw(rt, "abandoned"))
					h.command(fmt.Sprint(sent), abandon(id))
					abandons[id] = append(abandons[id], fmt.Sprint(sent))
					sent++
				}
			}
			for from, replies := range h.replies {
				if len(replies) > 1 {
					rt.Fatalf("command %s answered %d times: %v", from, len(replies), replies)
				}
			}
			if queued := h.e.Queued(); queued > 8 {
				rt.Fatalf("%d commands queued, the bound is 8", queued)
			}
		}
		h.step(Stop{})
		for i := range sent {
			if n := len(h.replies[fmt.Sprint(i)]); n != 1 {
				rt.Fatalf("command %d answered %d times after Stop", i, n)
			}
		}
		if h.e.Queued() != 0 {
			rt.Fatalf("%d commands queued after Stop", h.e.Queued())
		}
		for id, from := range longPolls {
			if r := h.replies[from][0]; len(r.GetReceipt()) != 0 || r.GetError() != nil {
				continue
			}
			_, receipted, err := h.state.mem.Get(keys.InboxKey("alice", id))
			if err != nil {
				rt.Fatal(err)
			}
			released := slices.ContainsFunc(abandons[id], func(a string) bool { return len(h.replies[a][0].GetReceipt()) != 0 })
			if receipted && !released {
				rt.Fatalf("long poll %s was answered with nothing, and its receipt is stored: it leased for nobody", id)
			}
		}
	})
}
