package schedule

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// Bounds of a definition's jitter_micros (when not zero), in microseconds.
const (
	MinJitterMicros = input.Second / 1000
	MaxJitterMicros = 7 * input.Day
)

// HasJitter reports whether def sets a jitter: a behaviour of apply version 6.
func HasJitter(def *orreryv1.ScheduleDefinition) bool {
	return def.GetJitterMicros() != 0 || def.GetJitterAllowEarly()
}

// validateJitter checks jitter_micros (0, or MinJitterMicros..MaxJitterMicros) and that
// jitter_allow_early comes with a jitter.
func validateJitter(def *orreryv1.ScheduleDefinition) *orrery.Error {
	j := def.GetJitterMicros()
	if j == 0 {
		if def.GetJitterAllowEarly() {
			return orrery.Invalid("jitter_allow_early", "needs a jitter_micros")
		}
		return nil
	}
	return orrery.AsError(input.Duration("jitter_micros", j, MinJitterMicros, MaxJitterMicros))
}

// JitterOffsetMicros is the offset the definition's jitter gives the occurrence (generation,
// ordinal) of its schedule: in [0, jitter_micros], or [-jitter_micros, +jitter_micros] when
// jitter_allow_early is set; 0 without a jitter. It is the first 8 bytes of the SHA-256 of
// the occurrence id, modulo the span, so it depends on nothing but the occurrence: every
// replica and every retry computes the same offset, on any release.
func JitterOffsetMicros(def *orreryv1.ScheduleDefinition, generation, ordinal uint64) int64 {
	j := def.GetJitterMicros()
	if j <= 0 {
		return 0
	}
	span := uint64(j)
	if def.GetJitterAllowEarly() {
		span = 2 * uint64(j)
	}
	sum := sha256.Sum256([]byte(OccurrenceID(def.GetScheduleId(), generation, ordinal)))
	offset := int64(binary.BigEndian.Uint64(sum[:8]) % (span + 1))
	if def.GetJitterAllowEarly() {
		offset -= j
	}
	return offset
}

// fireAt is the instant at which the series' ordinal, nominally due at nominalMicros, fires:
// the nominal instant moved by its jitter offset, within 0..MaxInstantMicros.
func fireAt(rec *orreryv1.ScheduleRecord, ordinal uint64, nominalMicros int64) int64 {
	offset := JitterOffsetMicros(rec.GetDefinition(), rec.GetGeneration(), ordinal)
	if offset == 0 {
		return nominalMicros
	}
	return min(max(nominalMicros+offset, 0), max(input.MaxInstantMicros, nominalMicros))
}

// nextFireAt is the instant the series' next ordinal fires (see fireAt); meaningless when the
// series has ended.
func nextFireAt(rec *orreryv1.ScheduleRecord) int64 {
	return fireAt(rec, rec.GetNextOrdinal(), rec.GetNextNominalUnixMicros())
}
