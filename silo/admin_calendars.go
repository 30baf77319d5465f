package silo

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// maxCalendarBodyBytes bounds a PUT /v1/calendars body: a calendar at its caps (1,000 dates and
// ranges, 16 cron expressions) is far smaller.
const maxCalendarBodyBytes = 1 << 20

// putCalendar serves PUT /v1/calendars/{namespace}/{name}: the body is a Calendar as protobuf
// JSON (time_zone, excluded_dates, excluded_ranges [{from, to}], excluded_crons, description;
// namespace and name, when given, must be the path's), put on every partition
// (client.PutCalendar).
func (s *Silo) putCalendar(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCalendarBodyBytes))
	if err != nil {
		writeError(w, orrery.Invalid("body", "unreadable or larger than %d bytes: %v", maxCalendarBodyBytes, err))
		return
	}
	cal := &orreryv1.Calendar{}
	if len(body) > 0 {
		if err := protojson.Unmarshal(body, cal); err != nil {
			writeError(w, orrery.Invalid("body", "is not a calendar in protobuf JSON: %v", err))
			return
		}
	}
	if cal.GetNamespace() != "" && cal.GetNamespace() != namespace {
		writeError(w, orrery.Invalid("namespace", "the body's %q is not the path's %q", cal.GetNamespace(), namespace))
		return
	}
	if cal.GetName() != "" && cal.GetName() != name {
		writeError(w, orrery.Invalid("name", "the body's %q is not the path's %q", cal.GetName(), name))
		return
	}
	cal.Namespace, cal.Name = namespace, name
	cl := s.adminClient(r)
	if err := partitionsNamed(cl.PutCalendar(r.Context(), cal)); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": namespace, "name": name, "partitions": cl.Partitions()})
}

// deleteCalendar serves DELETE /v1/calendars/{namespace}/{name}: the calendar removed from
// every partition (client.DeleteCalendar; 400 naming a schedule that references it).
func (s *Silo) deleteCalendar(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	cl := s.adminClient(r)
	if err := partitionsNamed(cl.DeleteCalendar(r.Context(), namespace, name)); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": namespace, "name": name, "deleted": true, "partitions": cl.Partitions()})
}

// getCalendar serves GET /v1/calendars/{namespace}/{name}: the CalendarRecord (404 when absent).
func (s *Silo) getCalendar(w http.ResponseWriter, r *http.Request) {
	rec, err := s.adminClient(r).GetCalendar(r.Context(), r.PathValue("namespace"), r.PathValue("name"))
	s.writeRecord(w, rec, err)
}

// listCalendars serves GET /v1/calendars/{namespace}?after=&max=: a page of the namespace's
// calendars ({"calendars": [CalendarRecord...], "next_after": the after of the next page, null
// on the last}).
func (s *Silo) listCalendars(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	maxCalendars := 0
	if v := q.Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, orrery.Invalid("max", "must be a positive integer, got %q", v))
			return
		}
		maxCalendars = n
	}
	page, next, err := s.adminClient(r).ListCalendars(r.Context(), r.PathValue("namespace"), q.Get("after"), maxCalendars)
	if err != nil {
		writeError(w, err)
		return
	}
	records := make([]json.RawMessage, len(page))
	for i, rec := range page {
		records[i] = protoJSON(rec)
	}
	var nextAfter *string
	if next != "" {
		nextAfter = &next
	}
	writeJSON(w, http.StatusOK, map[string]any{"calendars": records, "next_after": nextAfter})
}

// partitionsNamed makes a PartitionsError's message name the partitions not reached, not only
// the first one's error, keeping its code and field.
func partitionsNamed(err error) error {
	var missed *client.PartitionsError
	if errors.As(err, &missed) {
		named := orrery.Wrap(orrery.CodeOf(err), err, "%s", missed.Error())
		named.Field = orrery.AsError(err).Field
		return named
	}
	return err
}
