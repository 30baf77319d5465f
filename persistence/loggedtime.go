package persistence

// NextLoggedTime is the logged time of the next batch, in Unix microseconds: the wall clock
// (already truncated to microseconds, UTC) unless that is not after the last logged time, in
// which case one microsecond after it. Logged time therefore never goes backward or repeats,
// across restarts and failovers to a silo with a slower clock, as long as the last logged time
// is the persisted one (Store.LoggedTime).
func NextLoggedTime(lastMicros, wallMicros int64) int64 {
	return max(wallMicros, lastMicros+1)
}
