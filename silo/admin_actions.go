package silo

import (
	"net/http"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// scheduleAction serves POST
// /v1/schedules/{namespace}/{queue}/{key}/{id}/{pause|resume|trigger|skip-expired}: it pauses,
// resumes or triggers the schedule at whatever revision it is, or passes (in one command) the
// expired occurrences it stopped at, as the CLI does, and answers the schedule's mutation
// result.
func (s *Silo) scheduleAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		lane, id := lanePath(r), r.PathValue("id")
		var (
			res *orreryv1.ScheduleResult
			err error
		)
		switch action {
		case "pause":
			res, err = s.adminClient(r).PauseSchedule(r.Context(), &orreryv1.PauseSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
		case "resume":
			res, err = s.adminClient(r).ResumeSchedule(r.Context(), &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
		case "trigger":
			res, err = s.adminClient(r).TriggerSchedule(r.Context(), &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: id})
		case "skip-expired":
			res, err = s.adminClient(r).SkipExpired(r.Context(), &orreryv1.SkipExpired{Lane: lane, ScheduleId: id})
		}
		s.writeRecord(w, res, err)
	}
}

// scheduleActions are the actions scheduleAction serves.
var scheduleActions = []string{"pause", "resume", "trigger", "skip-expired"}
