package main

import (
	"fmt"
	"time"

	"github.com/orreryhq/orrery/clock"
)

// clockOffsetEnv is the environment variable, for testing only, that offsets the silo's wall
// clock (silo.Config.Clock) by a signed duration ("+7m", "-90s"): the chaos harness starts a
// silo whose clock is wrong with it. No deployment should set it.
const clockOffsetEnv = "ORRERY_CLOCK_OFFSET"

// maxClockOffset bounds clockOffsetEnv: a day either way.
const maxClockOffset = 24 * time.Hour

// parseClockOffset parses a clockOffsetEnv value; empty is no offset.
func parseClockOffset(spec string) (time.Duration, error) {
	if spec == "" {
		return 0, nil
	}
	offset, err := time.ParseDuration(spec)
	if err != nil || offset > maxClockOffset || offset < -maxClockOffset {
		return 0, fmt.Errorf("%s=%q: want a signed duration within ±%v, e.g. +7m", clockOffsetEnv, spec, maxClockOffset)
	}
	return offset, nil
}

// offsetClock is the wall clock moved by offset: Now is offset from the real instant, and
// AfterFunc waits the real duration.
type offsetClock struct {
	base   clock.Clock
	offset time.Duration
}

// Now returns the base clock's instant moved by the offset.
func (c offsetClock) Now() time.Time { return c.base.Now().Add(c.offset) }

// AfterFunc runs f after d on the base clock.
func (c offsetClock) AfterFunc(d time.Duration, f func()) clock.Timer { return c.base.AfterFunc(d, f) }
