package schedule

import (
	"fmt"

	"github.com/orreryhq/orrery/grains/input"
)

// OccurrenceID is the stable id of ordinal within generation of a schedule:
// recurring-{ScheduleId:N}-{Generation:x16}-{Ordinal:x16}.
func OccurrenceID(scheduleID string, generation, ordinal uint64) string {
	return fmt.Sprintf("recurring-%s-%016x-%016x", input.UUIDHex(scheduleID), generation, ordinal)
}

// ManualID is the id of an occurrence triggered by hand at a logged time:
// manual-{ScheduleId:N}-{Generation:x16}-{LoggedTimeUnixMicro:x16}.
func ManualID(scheduleID string, generation uint64, loggedNowMicros int64) string {
	return fmt.Sprintf("manual-%s-%016x-%016x", input.UUIDHex(scheduleID), generation, uint64(loggedNowMicros))
}
