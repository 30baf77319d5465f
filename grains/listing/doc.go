// Package listing owns reading a partition's schedules and sagas as pages: by namespace,
// optionally by queue and by state (a schedule's orreryv1.ScheduleState, a saga's phase), in
// (queue, key, id) order, bounded by a record count and a byte budget, each page ending with
// a continuation when more may follow — never silently partial. It also owns the listing
// index's coverage (orreryv1.ListIndexProgress): Build indexes, in bounded steps, the records
// stored before the index existed.
//
// A list by namespace or queue scans the records themselves (keys.Schedule and keys.Saga
// begin with the namespace and the queue); a list by state scans the state index
// (keys.ScheduleIndex, keys.SagaIndex), which the mutations of grains/schedule and grains/saga
// keep in the transaction that writes or deletes each record. Either way every key a page
// scans is one it answers with. It is pure: it reads and writes only through the kv view it is
// given.
package listing
