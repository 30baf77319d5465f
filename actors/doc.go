// Package actors owns the protoactor plumbing shared by every layer that hosts or calls grains:
// routing protoactor's logger to log/slog, and Call, the grain request helper with a
// caller-owned deadline, exponential backoff with jitter and single-attempt cluster requests.
//
// It sits in the grains-and-actors layer (docs/design.md §2), so the partition grain and the due
// coordinators may use it; the cluster package (memberlist provider, silo bootstrap) builds on
// it, never the other way round.
package actors
