package silo

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// FuzzAdminRequest: what an admin request brings from the network, its query string and its
// Authorization header, never panics the endpoint's decoders. A header authenticates exactly
// the principal of the token it bears (and nothing else does); each query decoder either
// accepts values within its documented bounds or fails Validation naming its parameter.
func FuzzAdminRequest(f *testing.F) {
	f.Add("state=paused&max=10&after=AAE", "Bearer ops-token")
	f.Add("from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00.5Z&max=3", "bearer  viewer-token ")
	f.Add("phase=waiting&after=%zz", "Basic b3BzOm9wcw==")
	f.Add("max=-1&max=2", "Bearer")
	f.Add("since=24h&max=5", "Bearer ops-token")
	f.Add("", "")
	tokens := map[string]string{"ops-token": "ops", "viewer-token": "viewer"}
	s := &Silo{}
	for token, principal := range tokens {
		s.cfg.AdminTokens = append(s.cfg.AdminTokens, NewAdminToken(token, principal))
	}
	validation := func(t *testing.T, err error, fields ...string) {
		t.Helper()
		if err == nil {
			return
		}
		e := orrery.AsError(err)
		if !errors.Is(err, orrery.ErrValidation) {
			t.Fatalf("a bad query failed %v, want Validation", err)
		}
		for _, f := range fields {
			if e.Field == f {
				return
			}
		}
		t.Fatalf("a bad query's error names %q, want one of %v", e.Field, fields)
	}
	f.Fuzz(func(t *testing.T, rawQuery, authorization string) {
		principal, problem := s.adminPrincipal(authorization)
		if (principal == "") == (problem == "") {
			t.Fatalf("header %q: principal %q and problem %q", authorization, principal, problem)
		}
		if principal != "" && principal != "ops" && principal != "viewer" {
			t.Fatalf("header %q authenticated %q, which no token names", authorization, principal)
		}
		query, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		state, _, maxRecords, err := listQuery(query, "state", "SCHEDULE_STATE_", orreryv1.ScheduleState_value)
		validation(t, err, "state", "max", "after")
		if err == nil && (maxRecords < 0 || maxRecords > client.MaxListMax || orreryv1.ScheduleState_name[state] == "") {
			t.Fatalf("query %q: state %d, max %d", rawQuery, state, maxRecords)
		}
		q, err := ledgerQuery(query)
		validation(t, err, "from", "to", "max", "after")
		if err == nil && q.MaxRecords < 0 {
			t.Fatalf("query %q: ledger max %d", rawQuery, q.MaxRecords)
		}
		a, err := auditQuery(query, time.Unix(1767225600, 0))
		validation(t, err, "since", "from", "to", "max", "after")
		if err == nil && (a.MaxRecords < 0 || a.MaxRecords > client.MaxListMax) {
			t.Fatalf("query %q: audit max %d", rawQuery, a.MaxRecords)
		}
		n, err := positiveMax(query, 100)
		validation(t, err, "max")
		if err == nil && n < 1 {
			t.Fatalf("query %q: lane max %d", rawQuery, n)
		}
	})
}
