package client

import (
	"errors"
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Unique makes an enqueue unique in its lane by key (Enqueue.unique, EnqueueOptions.Unique):
// while the lane holds the key, another enqueue with it stores nothing and is reported as a
// duplicate of the message holding it. period 0 holds the key while that message is live
// (visible, delayed or leased: until it is acked, expires, is cancelled or dead-lettered); a
// positive period holds it for that long from the enqueue, whatever becomes of the message (at
// most 30 days). The key is 1..256 bytes of text without control characters.
func Unique(key string, period time.Duration) *orreryv1.UniqueSpec {
	return &orreryv1.UniqueSpec{Key: key, PeriodMicros: period.Microseconds()}
}

// UniqueByPayload is Unique with the key computed by the partition from the message: the hex
// SHA-256 of its payload JSON, a zero byte and its headers JSON, so that an enqueue of the same
// payload and headers into the lane is a duplicate.
func UniqueByPayload(period time.Duration) *orreryv1.UniqueSpec {
	return &orreryv1.UniqueSpec{ByPayload: true, PeriodMicros: period.Microseconds()}
}

// ErrDuplicate matches, with errors.Is, the *DuplicateError of an enqueue skipped as a
// duplicate when the caller asked for an error (EnqueueOptions.ErrorOnDuplicate). Without that
// option a duplicate is not an error.
var ErrDuplicate = errors.New("orrery client: enqueue skipped as a duplicate")

// DuplicateError is an enqueue skipped as a duplicate of the message holding its unique key
// (EnqueueOptions.ErrorOnDuplicate); errors.Is(err, ErrDuplicate) matches it.
type DuplicateError struct {
	// ID is the id the skipped enqueue carried; DuplicateOf is the id of the message holding
	// the key.
	ID, DuplicateOf string
}

// Error says which message holds the key.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("orrery client: enqueue of message %q skipped as a duplicate: message %q holds its unique key in the lane", e.ID, e.DuplicateOf)
}

// Is reports whether target is ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }
