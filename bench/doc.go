// Package bench holds Orrery's system benchmarks: a real silo in this process (32 Badger
// partitions, the due coordinator, group commit), driven through its client, with figures
// reported by b.ReportMetric and, where a ceiling matters, compared against raw Badger on the
// same machine in the same run. BenchmarkLatenessFloor runs the partition stores alone with
// the writes of BenchmarkDueLateness's load, the storage floor under that benchmark. Run them with `make bench`; `make test` runs them scaled down
// (-short) so they keep working.
package bench
