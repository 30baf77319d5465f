package batch

import (
	"github.com/orreryhq/orrery/grains/audit"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/listing"
	"github.com/orreryhq/orrery/grains/queue"
)

// HousekeepingDue reports, with a few bounded reads, whether a Housekeep mutation at loggedNow
// would index or remove anything: records the listing index does not cover yet, a receipt
// expired or beyond the cap, a message tombstone, a ledger record or an audit record past its
// retention, or a unique record whose period has passed. Partitions ask before running one, so
// an idle partition writes nothing.
func (a Applier) HousekeepingDue(r kv.Reader, loggedNowMicros int64) (bool, error) {
	if build, err := listing.BuildDue(r); err != nil || build {
		return build, err
	}
	count, err := receiptCount(r)
	if err != nil || count > a.Limits.MaxReceipts {
		return err == nil, err
	}
	due := false
	err = r.Scan(keys.Of(keys.InboxExpiry, nil), keys.InboxExpiryUpTo(loggedNowMicros), func(_, _ []byte) (bool, error) {
		due = true
		return false, nil
	})
	if err != nil || due {
		return due, err
	}
	err = r.Scan(keys.Of(keys.TombstoneAge, nil), keys.TombstoneAgeUpTo(loggedNowMicros-a.Limits.TombstoneRetentionMicros), func(_, _ []byte) (bool, error) {
		due = true
		return false, nil
	})
	if err != nil || due {
		return due, err
	}
	err = r.Scan(keys.Of(keys.LedgerAge, nil), keys.LedgerAgeUpTo(loggedNowMicros-a.Limits.LedgerRetentionMicros), func(_, _ []byte) (bool, error) {
		due = true
		return false, nil
	})
	if err != nil || due {
		return due, err
	}
	if due, err := audit.PruneDue(r, loggedNowMicros-a.Limits.AuditRetentionMicros); err != nil || due {
		return due, err
	}
	return queue.UniquePruneDue(r, loggedNowMicros)
}
