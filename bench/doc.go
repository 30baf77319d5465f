// Package bench holds Orrery's system benchmarks: a real silo in this process (32 partitions,
// each a Raft group on the one silo store, with the due coordinator), driven through its
// client, with figures reported by b.ReportMetric and, where a ceiling matters, compared
// against raw Badger on the same machine in the same run:
//
//   - BenchmarkEmitThroughput: occurrences durably enqueued per second by many due schedules
//     with a backlog, and that rate as a ratio of raw Badger's durable-write ceiling;
//   - BenchmarkDueLateness: Every 1s schedules with a worker, the enqueue and handler lateness
//     against each occurrence's due time, and the CPU it takes;
//   - BenchmarkBurst: schedules that all fall due on the same second, the handler lateness,
//     and no early, duplicate or missed occurrence;
//   - BenchmarkConsume: already-due messages consumed in a closed loop, completions per second
//     and the memory it takes, every ack durable;
//   - BenchmarkIdleSchedules: a million schedules due far ahead, the creation rate, resident
//     memory and idle CPU;
//   - BenchmarkSteadyDisk: a steady emit-and-ack workload, the bytes on disk against the live
//     data.
//
// Run them with `make bench`; `make test` runs them scaled down (-short) so they keep working.
package bench
