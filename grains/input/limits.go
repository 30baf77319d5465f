package input

import orreryv1 "github.com/orreryhq/orrery/api/v1"

// Proto is l as a partition keeps it (PartitionLimits).
func (l Limits) Proto() *orreryv1.PartitionLimits {
	return &orreryv1.PartitionLimits{
		MaxPayloadBytes:              int64(l.MaxPayloadBytes),
		MaxHeadersBytes:              int64(l.MaxHeadersBytes),
		MaxStateBytes:                int64(l.MaxStateBytes),
		MaxLaneMessages:              l.MaxLaneMessages,
		MaxLaneBytes:                 l.MaxLaneBytes,
		MaxPartitionRecords:          l.MaxPartitionRecords,
		MaxPartitionRecordBytes:      l.MaxPartitionRecordBytes,
		MaxMutationsPerBatch:         int64(l.MaxMutationsPerBatch),
		MaxEmitPerCommand:            l.MaxEmitPerCommand,
		MaxEmitBytesPerBatch:         int64(l.MaxEmitBytesPerBatch),
		MaxPassedPerEmit:             l.MaxPassedPerEmit,
		MaxReceivePerCommand:         l.MaxReceivePerCommand,
		MaxReceiveBytesPerCommand:    int64(l.MaxReceiveBytesPerCommand),
		MaxLeaseMicros:               l.MaxLeaseMicros,
		DefaultLeaseMicros:           l.DefaultLeaseMicros,
		DefaultMaxDeliveries:         l.DefaultMaxDeliveries,
		MaxMaxDeliveries:             l.MaxMaxDeliveries,
		MaxDelayMicros:               l.MaxDelayMicros,
		ReceiptRetentionMicros:       l.ReceiptRetentionMicros,
		SystemReceiptRetentionMicros: l.SystemReceiptRetentionMicros,
		MaxReceipts:                  l.MaxReceipts,
		TombstoneRetentionMicros:     l.TombstoneRetentionMicros,
		LedgerRetentionMicros:        l.LedgerRetentionMicros,
		AuditRetentionMicros:         l.AuditRetentionMicros,
		PriorityStepMicros:           &l.PriorityStepMicros,
	}
}

// LimitsOf is the Limits a PartitionLimits holds; one written before priority_step_micros
// existed holds the default step.
func LimitsOf(p *orreryv1.PartitionLimits) Limits {
	step := DefaultLimits().PriorityStepMicros
	if p.PriorityStepMicros != nil {
		step = p.GetPriorityStepMicros()
	}
	return Limits{
		MaxPayloadBytes:              int(p.GetMaxPayloadBytes()),
		MaxHeadersBytes:              int(p.GetMaxHeadersBytes()),
		MaxStateBytes:                int(p.GetMaxStateBytes()),
		MaxLaneMessages:              p.GetMaxLaneMessages(),
		MaxLaneBytes:                 p.GetMaxLaneBytes(),
		MaxPartitionRecords:          p.GetMaxPartitionRecords(),
		MaxPartitionRecordBytes:      p.GetMaxPartitionRecordBytes(),
		MaxMutationsPerBatch:         int(p.GetMaxMutationsPerBatch()),
		MaxEmitPerCommand:            p.GetMaxEmitPerCommand(),
		MaxEmitBytesPerBatch:         int(p.GetMaxEmitBytesPerBatch()),
		MaxPassedPerEmit:             p.GetMaxPassedPerEmit(),
		MaxReceivePerCommand:         p.GetMaxReceivePerCommand(),
		MaxReceiveBytesPerCommand:    int(p.GetMaxReceiveBytesPerCommand()),
		MaxLeaseMicros:               p.GetMaxLeaseMicros(),
		DefaultLeaseMicros:           p.GetDefaultLeaseMicros(),
		DefaultMaxDeliveries:         p.GetDefaultMaxDeliveries(),
		MaxMaxDeliveries:             p.GetMaxMaxDeliveries(),
		MaxDelayMicros:               p.GetMaxDelayMicros(),
		ReceiptRetentionMicros:       p.GetReceiptRetentionMicros(),
		SystemReceiptRetentionMicros: p.GetSystemReceiptRetentionMicros(),
		MaxReceipts:                  p.GetMaxReceipts(),
		TombstoneRetentionMicros:     p.GetTombstoneRetentionMicros(),
		LedgerRetentionMicros:        p.GetLedgerRetentionMicros(),
		AuditRetentionMicros:         p.GetAuditRetentionMicros(),
		PriorityStepMicros:           step,
	}
}

// MaxMessageBytes is the largest gRPC message the actor transport (package cluster) sends or
// receives, on servers and clients alike (gRPC's own default receive limit is 4 MiB). It is the largest
// command or reply under DefaultLimits, rounded up to a power of two: a command of
// MaxMutationsPerBatch (256) maximal saga exchanges is Limits.MaxCommandBytes, about
// 133 MiB, and a reply of 256 maximal receives is Limits.MaxReplyBytes, about 228 MiB.
// A silo refuses to start with limits whose largest command or reply would not fit
// (cluster.CheckLimits), and a client refuses to send a command whose encoding exceeds it.
const MaxMessageBytes = 256 << 20

// CommandLimits are l's command limits as a partition reports them to clients
// (PartitionStatus.command_limits), with the transport's MaxMessageBytes.
func (l Limits) CommandLimits() *orreryv1.CommandLimits {
	return &orreryv1.CommandLimits{
		MaxPayloadBytes:      uint32(l.MaxPayloadBytes),
		MaxHeadersBytes:      uint32(l.MaxHeadersBytes),
		MaxStateBytes:        uint32(l.MaxStateBytes),
		MaxMutationsPerBatch: uint32(l.MaxMutationsPerBatch),
		MaxMessageBytes:      MaxMessageBytes,
	}
}
