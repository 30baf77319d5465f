package input

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// MaxJitterPercent bounds RetryPolicy.jitter_percent: a jitter takes at most the whole backoff.
const MaxJitterPercent = 100

// RetryPolicy checks an optional retry policy (nil is none): max_attempts 0 (the message's
// max_deliveries) or 1..lim.MaxMaxDeliveries, both backoffs 0..lim.MaxDelayMicros with the
// initial one at most the maximum, jitter_percent 0..100 and a known on_exhausted. Errors
// name the field under field ("retry.initial_backoff_micros").
func RetryPolicy(field string, p *orreryv1.RetryPolicy, lim Limits) error {
	if p == nil {
		return nil
	}
	if n := p.GetMaxAttempts(); n > lim.MaxMaxDeliveries {
		return orrery.Invalid(field+".max_attempts", "must be between 0 (the message's max_deliveries) and %d, got %d", lim.MaxMaxDeliveries, n)
	}
	if err := Duration(field+".initial_backoff_micros", p.GetInitialBackoffMicros(), 0, lim.MaxDelayMicros); err != nil {
		return err
	}
	if err := Duration(field+".max_backoff_micros", p.GetMaxBackoffMicros(), 0, lim.MaxDelayMicros); err != nil {
		return err
	}
	if p.GetInitialBackoffMicros() > p.GetMaxBackoffMicros() {
		return orrery.Invalid(field+".initial_backoff_micros", "must be at most max_backoff_micros (%s), got %s",
			FormatDuration(p.GetMaxBackoffMicros()), FormatDuration(p.GetInitialBackoffMicros()))
	}
	if j := p.GetJitterPercent(); j > MaxJitterPercent {
		return orrery.Invalid(field+".jitter_percent", "must be between 0 and %d, got %d", MaxJitterPercent, j)
	}
	switch p.GetOnExhausted() {
	case orreryv1.RetryExhausted_RETRY_EXHAUSTED_UNSPECIFIED, orreryv1.RetryExhausted_RETRY_EXHAUSTED_DEAD_LETTER, orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP:
		return nil
	default:
		return orrery.Invalid(field+".on_exhausted", "is not a RetryExhausted value: %d", p.GetOnExhausted())
	}
}
