package batch

import (
	"bytes"
	"encoding/binary"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/audit"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/listing"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// MaxHousekeepRecords bounds one Housekeep mutation.
const MaxHousekeepRecords = 10_000

// storeReceipt writes a command's receipt to the inbox with its expiry index, and counts it.
func (a Applier) storeReceipt(v kv.View, principal, commandID string, hash, encoded []byte, loggedNowMicros int64) error {
	retention := a.Limits.ReceiptRetentionMicros
	if input.IsSystem(principal) {
		retention = a.Limits.SystemReceiptRetentionMicros
	}
	expiresAt, ok := input.AddMicros(loggedNowMicros, retention)
	if !ok {
		expiresAt = input.MaxInstantMicros
	}
	entry := &orreryv1.InboxEntry{RequestHash: hash, Receipt: encoded, LoggedTimeUnixMicros: loggedNowMicros, ExpiresAtUnixMicros: expiresAt}
	if _, err := record.Store(v, keys.InboxKey(principal, commandID), entry); err != nil {
		return err
	}
	if err := v.Set(keys.InboxExpiryKey(expiresAt, principal, commandID), nil); err != nil {
		return err
	}
	count, err := receiptCount(v)
	if err != nil {
		return err
	}
	return setReceiptCount(v, count+1)
}

// housekeep indexes records the listing index does not cover yet (listing.Build), then removes
// expired receipts, the soonest-expiring receipts beyond the cap, expired message tombstones,
// ledger records and audit records past their retention, and unique records whose period has
// passed (queue.PruneUniques), at most m.MaxRecords in all (0 means 1000), in that order.
func (a Applier) housekeep(v kv.View, m *orreryv1.Housekeep, loggedNowMicros int64) (*orreryv1.HousekeepResult, error) {
	budget := int(m.GetMaxRecords())
	if budget == 0 {
		budget = 1000
	}
	if budget > MaxHousekeepRecords {
		return nil, orrery.Invalid("max_records", "must be at most %d, got %d", MaxHousekeepRecords, budget)
	}
	res := &orreryv1.HousekeepResult{}
	built, more, err := listing.Build(v, budget)
	if err != nil {
		return nil, err
	}
	res.IndexRecordsBuilt = uint32(built)
	if more {
		res.More = true
		return res, nil
	}
	budget -= built
	if budget == 0 {
		// Whether retention has work is for the next Housekeep to find.
		res.More = true
		return res, nil
	}
	count, err := receiptCount(v)
	if err != nil {
		return nil, err
	}
	// Receipts expired by now, then (oldest expiry first) those beyond the cap.
	var doomed [][]byte
	over := uint64(0)
	if count > a.Limits.MaxReceipts {
		over = count - a.Limits.MaxReceipts
	}
	err = v.Scan(keys.Of(keys.InboxExpiry, nil), kv.PrefixEnd(keys.InboxExpiry), func(key, _ []byte) (bool, error) {
		expiresAt := int64(binary.BigEndian.Uint64(key[len(keys.InboxExpiry):]))
		if expiresAt > loggedNowMicros && uint64(len(doomed)) >= over {
			return false, nil
		}
		if len(doomed) == budget {
			res.More = true
			return false, nil
		}
		doomed = append(doomed, bytes.Clone(key))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, key := range doomed {
		principal, commandID, err := keys.SplitInboxExpiry(key)
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeInternal, err, "inbox expiry index %x", key)
		}
		if err := v.Delete(keys.InboxKey(principal, commandID)); err != nil {
			return nil, err
		}
		if err := v.Delete(key); err != nil {
			return nil, err
		}
	}
	res.ReceiptsRemoved = uint32(len(doomed))
	if err := setReceiptCount(v, count-uint64(len(doomed))); err != nil {
		return nil, err
	}
	if left := budget - len(doomed); left > 0 {
		removed, more, err := queue.PruneTombstones(v, loggedNowMicros-a.Limits.TombstoneRetentionMicros, left)
		if err != nil {
			return nil, err
		}
		res.TombstonesRemoved = uint32(removed)
		res.More = res.More || more
	} else {
		res.More = true
	}
	if left := budget - len(doomed) - int(res.TombstonesRemoved); left > 0 && !res.More {
		removed, more, err := schedule.PruneLedger(v, loggedNowMicros-a.Limits.LedgerRetentionMicros, left)
		if err != nil {
			return nil, err
		}
		res.LedgerRecordsRemoved = uint32(removed)
		res.More = more
	} else {
		res.More = true
	}
	if left := budget - len(doomed) - int(res.TombstonesRemoved) - int(res.LedgerRecordsRemoved); left > 0 && !res.More {
		removed, more, err := audit.Prune(v, loggedNowMicros-a.Limits.AuditRetentionMicros, left)
		if err != nil {
			return nil, err
		}
		res.AuditRecordsRemoved = uint32(removed)
		res.More = more
	} else {
		res.More = true
	}
	if left := budget - len(doomed) - int(res.TombstonesRemoved) - int(res.LedgerRecordsRemoved) - int(res.AuditRecordsRemoved); left > 0 && !res.More {
		removed, more, err := queue.PruneUniques(v, loggedNowMicros, left)
		if err != nil {
			return nil, err
		}
		res.UniqueRecordsRemoved = uint32(removed)
		res.More = more
	} else {
		res.More = true
	}
	return res, nil
}

func receiptCount(v kv.Reader) (uint64, error) {
	b, found, err := v.Get(keys.ReceiptCount)
	if err != nil || !found {
		return 0, err
	}
	if len(b) != 8 {
		return 0, orrery.Errorf(orrery.CodeInternal, "receipt count record is %d bytes, want 8", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

func setReceiptCount(v kv.View, n uint64) error {
	return v.Set(keys.ReceiptCount, binary.BigEndian.AppendUint64(nil, n))
}
