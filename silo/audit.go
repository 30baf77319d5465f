package silo

import (
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/client"
)

// Denial sources: the label source of orrery_audit_denials_total.
const (
	denialInspect = "inspect" // an inspection a grain of this silo refused Unauthorized
	denialAdmin   = "admin"   // an admin request answered 401 or 403
)

// deniedReads records the denials outside apply, which write no partition state (package
// grains/audit): each is a log line on the silo's "audit" logger (logger=audit, audit=true,
// principal, what, when, source, message) and a count of orrery_audit_denials_total.
type deniedReads struct {
	log   *slog.Logger
	count *prometheus.CounterVec
}

func newDeniedReads(logger *slog.Logger) *deniedReads {
	d := &deniedReads{
		log: logger.With("logger", "audit"),
		count: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orrery_audit_denials_total",
			Help: "Denials outside apply, which the partitions' audit log does not hold: inspections this silo's grains refused Unauthorized (source inspect), admin requests answered 401 or 403 (source admin).",
		}, []string{"source"}),
	}
	for _, source := range []string{denialInspect, denialAdmin} {
		d.count.WithLabelValues(source)
	}
	return d
}

// record logs and counts one denial of what (an inspection target, an admin route) to
// principal ("" when unauthenticated).
func (d *deniedReads) record(source, principal, what, message string) {
	d.count.WithLabelValues(source).Inc()
	d.log.Warn("denied", "audit", true, "principal", principal, "what", what,
		"when", time.Now().UTC().Format(time.RFC3339Nano), "source", source, "message", message)
}

// statusRecorder keeps the status an admin handler answers, for the audit of its 403s.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// auditLog serves GET /v1/audit?since=&from=&to=&after=&max=: a page of the cluster's audit
// log (client.ReadAudit) for a principal holding PolicyAdmin on "*". since is a duration back
// from now (as time.ParseDuration spells it); from and to are RFC 3339 instants.
func (s *Silo) auditLog(w http.ResponseWriter, r *http.Request) {
	q, err := auditQuery(r.URL.Query(), time.Now())
	if err != nil {
		writeError(w, err)
		return
	}
	page, next, err := s.adminClient(r).ReadAudit(r.Context(), q)
	if err != nil {
		writeError(w, err)
		return
	}
	items := make([]map[string]any, len(page))
	for i, e := range page {
		items[i] = map[string]any{"partition": e.Partition, "record": protoJSON(e.Record)}
	}
	writePage(w, "records", items, next)
}

// auditQuery reads an audit page's since (a duration back from now), from and to (RFC 3339
// instants; from wins over since), after and max.
func auditQuery(query url.Values, now time.Time) (client.AuditQuery, error) {
	var q client.AuditQuery
	if v := query.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return client.AuditQuery{}, orrery.Invalid("since", "must be a positive duration (24h), got %q", v)
		}
		q.From = now.Add(-d)
	}
	from, to, err := timeBounds(query)
	if err != nil {
		return client.AuditQuery{}, err
	}
	if !from.IsZero() {
		q.From = from
	}
	q.To = to
	_, q.After, q.MaxRecords, err = listQuery(query, "", "", nil)
	if err != nil {
		return client.AuditQuery{}, err
	}
	return q, nil
}
