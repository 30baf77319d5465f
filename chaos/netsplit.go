package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// A netSplit cuts a cluster in two on loopback: the traffic between any silo of one side and any
// silo of the other is dropped, both ways, while the silos of a side still reach each other and
// every other process (the test's clients) still reaches them all. Each silo must be Isolatable:
// the split's nftables table marks, in the output chain, each loopback packet a socket of a
// side's cgroups sends with that side's mark, and drops, in the input chain, a packet of one
// side's mark addressed to a socket of the other side's cgroups. Healing deletes the table.
type netSplit struct {
	table string
	rules string
}

// The marks of the two sides of a netSplit (netcutMark's neighbours).
const (
	splitMarkA = netcutMark + 1
	splitMarkB = netcutMark + 2
)

// splitRuleset is the nft script of a split between the cgroups of sides a and b, in table.
func splitRuleset(table string, a, b []*netcut) string {
	var out, in strings.Builder
	match := func(n *netcut) string { return fmt.Sprintf("socket cgroupv2 level %d %q", n.level, n.name) }
	for _, side := range []struct {
		own, other []*netcut
		mark       int
	}{{a, b, splitMarkA}, {b, a, splitMarkB}} {
		for _, n := range side.own {
			fmt.Fprintf(&out, "\t\t%s oif \"lo\" meta mark set %#x\n", match(n), side.mark)
		}
		for _, n := range side.other {
			fmt.Fprintf(&in, "\t\tmeta mark %#x %s drop\n", side.mark, match(n))
		}
	}
	return fmt.Sprintf(`add table inet %[1]s
delete table inet %[1]s
table inet %[1]s {
	chain output {
		type filter hook output priority 0; policy accept;
%[2]s	}
	chain input {
		type filter hook input priority 0; policy accept;
%[3]s	}
}
`, table, out.String(), in.String())
}

// Split cuts the traffic between the silos of a and those of b (each Isolatable, none isolated)
// until Heal, and checks that the test process still reaches a silo of b. The error leaves
// nothing installed.
func Split(a, b []*SiloProcess) (*netSplit, error) {
	cuts := func(side []*SiloProcess) ([]*netcut, error) {
		var out []*netcut
		for _, p := range side {
			if p.Spec.cut == nil {
				return nil, fmt.Errorf("silo %s: Split needs SiloSpec.Isolatable", p.GossipAddress())
			}
			out = append(out, p.Spec.cut)
		}
		return out, nil
	}
	cutsA, err := cuts(a)
	if err != nil {
		return nil, err
	}
	cutsB, err := cuts(b)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 || len(b) == 0 {
		return nil, errors.New("split: each side needs a silo")
	}
	s := &netSplit{table: fmt.Sprintf("orrery_chaos_%d_split%d", os.Getpid(), netcutSeq.Add(1))}
	s.rules = splitRuleset(s.table, cutsA, cutsB)
	if err := nftScript(s.rules); err != nil {
		return nil, fmt.Errorf("split: %w", err)
	}
	conn, err := net.DialTimeout("tcp", b[0].AdminAddress(), 2*time.Second)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("split: the test process cannot reach silo %s's admin port: %w", b[0].GossipAddress(), err), s.Heal())
	}
	conn.Close()
	return s, nil
}

// Heal deletes the split's table: the two sides reach each other again.
func (s *netSplit) Heal() error {
	if err := deleteTable(s.table); err != nil {
		return fmt.Errorf("heal split: %w", err)
	}
	return nil
}
