package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// zoneRules SIGKILLs a silo (most often a partition's leader), starts it again with ZONEINFO
// naming a zone database in which Europe/Berlin has UTC's rules (writeOtherZoneinfo), lets it
// serve 10–30 s (its replicas lead or follow while the workload's Europe/Berlin cron schedules
// are due), then SIGKILLs it and starts it again without. The silo must say it ignores
// ZONEINFO; the cron checker finds any occurrence it put at an instant of the other rules.
func (n *nemesis) zoneRules(ctx context.Context, f *Fault) error {
	i, leads := n.target(ctx)
	held := between(n.rng, 10*time.Second, 30*time.Second)
	f.Detail = fmt.Sprintf("SIGKILL %s and restart it with ZONEINFO of other Europe/Berlin rules for %v", n.describe(f, i, leads), held.Round(time.Millisecond))
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	if n.zoneinfo == "" {
		path, err := writeOtherZoneinfo(n.t.TempDir())
		if err != nil {
			return err
		}
		n.zoneinfo = path
	}
	p := n.cl.Silos[i]
	n.expectExit(p)
	p.Kill()
	if err := n.restartWith(i, "ZONEINFO="+n.zoneinfo); err != nil {
		return err
	}
	n.sleep(ctx, held)
	p = n.cl.Silos[i]
	var ignored error
	if !strings.Contains(p.Log(), "ZONEINFO is ignored") {
		ignored = fmt.Errorf("silo %d, started with ZONEINFO=%s, did not say it ignores it", i, n.zoneinfo)
	}
	n.expectExit(p)
	p.Kill()
	if err := n.restart(i); err != nil {
		return err
	}
	f.Undone = time.Now().UTC()
	if err := n.awaitRejoined(ctx, i); err != nil {
		return err
	}
	return ignored
}
