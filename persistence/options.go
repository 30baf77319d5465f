package persistence

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Defaults of Options, sized for a silo's one store, which holds every partition it hosts.
const (
	// DefaultMemTableBytes is the size of one Badger memtable. Badger caps one transaction at
	// 15 % of it, so this also sets PartitionState.MaxBatchBytes (about 9.6 MB).
	DefaultMemTableBytes = 64 << 20
	// DefaultBlockCacheBytes is the block cache: the tables' blocks are compressed, and the
	// cache keeps recently read ones decompressed.
	DefaultBlockCacheBytes = 16 << 20
	// DefaultValueLogFileBytes is the size of one value-log file. Values stay in the LSM tree
	// (see Options.ValueThresholdBytes), so the value log holds almost nothing.
	DefaultValueLogFileBytes = 16 << 20
	// DefaultValueThresholdBytes is the largest value kept in the LSM tree (1 MiB, Badger's
	// maximum). Keeping every value below it keeps the value log, whose sync errors Badger only
	// logs, out of the write path.
	DefaultValueThresholdBytes = 1 << 20
)

// Options configure the silo store. The zero value is usable: every zero field takes its
// default.
type Options struct {
	// MemTableBytes is the Badger memtable size (default DefaultMemTableBytes). It bounds the
	// largest apply: see PartitionState.MaxBatchBytes.
	MemTableBytes int64
	// BlockCacheBytes is the Badger block cache (default DefaultBlockCacheBytes).
	BlockCacheBytes int64
	// ValueThresholdBytes is the largest value kept inline in the LSM tree (default and
	// maximum DefaultValueThresholdBytes; it is lowered to MaxBatchBytes when that is smaller).
	ValueThresholdBytes int64
	// MinFreeBytes is the free-disk floor: opening the store fails with Unavailable, and the
	// partitions refuse new commands (SiloStore.CheckFreeSpace), when the file system holding
	// it has less free space than this (read at most every FreeSpaceRecheck). Zero disables
	// the check. Badger dies with SIGBUS when a memtable flush finds the disk full; a floor of
	// a few memtables avoids that.
	MinFreeBytes uint64
	// Logger receives Badger's warnings and errors (default slog.Default()). Badger's info and
	// debug messages are dropped.
	Logger *slog.Logger
	// FreeBytesFunc replaces FreeBytes for the free-disk floor; tests use it to simulate a
	// full disk. Nil means FreeBytes.
	FreeBytesFunc func(dir string) (uint64, error)
}

func (o Options) withDefaults() Options {
	if o.MemTableBytes <= 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.BlockCacheBytes <= 0 {
		o.BlockCacheBytes = DefaultBlockCacheBytes
	}
	maxBatch := maxBatchBytes(o.MemTableBytes)
	if o.ValueThresholdBytes <= 0 || o.ValueThresholdBytes > DefaultValueThresholdBytes {
		o.ValueThresholdBytes = DefaultValueThresholdBytes
	}
	if o.ValueThresholdBytes > maxBatch {
		o.ValueThresholdBytes = maxBatch
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FreeBytesFunc == nil {
		o.FreeBytesFunc = FreeBytes
	}
	return o
}

// maxBatchBytes mirrors Badger's transaction cap (db.go checkAndSetOptions: 15 % of the
// memtable). PartitionState.MaxBatchBytes reports the figure of the open database.
func maxBatchBytes(memTableBytes int64) int64 { return 15 * memTableBytes / 100 }

// badgerOptions are the Badger options of the silo store:
//   - two memtables of MemTableBytes (Badger's default is five of 64 MiB);
//   - a block cache and no separate index cache (indexes stay in memory);
//   - tables compressed with Snappy. A partition's records repeat themselves (the same
//     namespace, queue and template in every schedule, ids sharing their lane's prefix), and
//     Badger writes each table through its mmap, so every table page stays resident: 1,000,000
//     idle schedules took 495 MiB of tables, all resident, and take 109 MiB compressed. Less to
//     write also made BenchmarkEmitThroughput faster (58k against 41–44k occurrences/s);
//     consuming and bursts did not move. Badger records each table's compression in its
//     manifest, so a store written without it opens as before;
//   - four level-0 tables before compaction (with two, compaction rewrote level 1 so often
//     that EmitThroughput ran at 33k occurrences/s against 52–55k with four, back to back),
//     and two compactors (the minimum that compacts);
//   - small value-log files, since values stay in the LSM tree;
//   - conflict detection off: the store numbers its own versions and serializes its commits;
//   - no sync inside Badger's commit: each Raft round's write syncs the write-ahead logs
//     (walSyncer), which makes every apply committed before it durable too;
//   - metrics off (they are process-global expvars), logging routed to slog at WARN.
func badgerOptions(dir string, o Options) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(false). // the store syncs: see walSyncer
		WithLogger(slogLogger{logger: o.Logger}).
		WithMetricsEnabled(false).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithMemTableSize(o.MemTableBytes).
		WithNumMemtables(2).
		WithBaseTableSize(8 << 20).
		WithBaseLevelSize(64 << 20).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		WithNumCompactors(2).
		WithBlockCacheSize(o.BlockCacheBytes).
		WithIndexCacheSize(0).
		WithCompression(options.Snappy).
		WithValueThreshold(o.ValueThresholdBytes).
		WithValueLogFileSize(DefaultValueLogFileBytes).
		WithNumGoroutines(1)
}

// slogLogger routes Badger's log to slog: warnings and errors only.
type slogLogger struct{ logger *slog.Logger }

func (l slogLogger) Errorf(format string, args ...any) {
	l.logger.Log(context.Background(), slog.LevelError, "badger: "+trimNewline(fmt.Sprintf(format, args...)))
}

func (l slogLogger) Warningf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if cacheReport(msg) {
		return
	}
	l.logger.Log(context.Background(), slog.LevelWarn, "badger: "+trimNewline(msg))
}

// cacheReport recognizes the block-cache statistics Badger logs at WARN when a database
// closes. The cache is small on purpose (Options.BlockCacheBytes): the report is not
// actionable.
func cacheReport(msg string) bool {
	return strings.HasPrefix(msg, "Block cache might be too small") || strings.HasPrefix(msg, "Cache life expectancy")
}

func (slogLogger) Infof(string, ...any)  {}
func (slogLogger) Debugf(string, ...any) {}

func trimNewline(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}
