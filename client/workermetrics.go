package client

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orreryhq/orrery"
)

// workerMetrics are the series a Worker records when WorkerConfig.Metrics is set: both carry
// the namespace and queue as labels.
type workerMetrics struct {
	// startLateness observes, per handler run, its start minus the message's enqueue
	// (logged) time.
	startLateness prometheus.Observer
	// handledOK and handledErr count the handler runs that returned nil and an error.
	handledOK, handledErr prometheus.Counter
}

// Worker series names.
const (
	workerStartLatenessName = "orrery_worker_handler_start_lateness_seconds"
	workerHandledName       = "orrery_worker_handled_total"
)

// workerLatenessBuckets span 1 ms to about 2 min.
var workerLatenessBuckets = prometheus.ExponentialBuckets(0.001, 2, 18)

// newWorkerMetrics registers the worker's series for its queue with reg; a series another
// worker of the same queue registered there already is shared.
func newWorkerMetrics(reg prometheus.Registerer, namespace, queue string) (*workerMetrics, error) {
	labels := prometheus.Labels{"namespace": namespace, "queue": queue}
	lateness, err := register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        workerStartLatenessName,
		Help:        "Time from a message's enqueue (its logged time on the partition's leader) to its handler's start on this worker's clock.",
		Buckets:     workerLatenessBuckets,
		ConstLabels: labels,
	}))
	if err != nil {
		return nil, err
	}
	handled, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        workerHandledName,
		Help:        "Handler runs of this worker by outcome: ok (returned nil, the message is acked) or error (released).",
		ConstLabels: labels,
	}, []string{"outcome"}))
	if err != nil {
		return nil, err
	}
	return &workerMetrics{
		startLateness: lateness,
		handledOK:     handled.WithLabelValues("ok"),
		handledErr:    handled.WithLabelValues("error"),
	}, nil
}

// register registers c with reg, or returns the collector already registered in its place.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		var zero C
		return zero, orrery.Invalid("metrics", "cannot register the worker's series: %v", err)
	}
	return c, nil
}

// started records a handler's start at startedAt for m.
func (wm *workerMetrics) started(m *Message, startedAt time.Time) {
	if wm != nil {
		wm.startLateness.Observe(startedAt.Sub(m.EnqueuedAt()).Seconds())
	}
}

// handled counts a handler run that returned err.
func (wm *workerMetrics) handled(err error) {
	switch {
	case wm == nil:
	case err == nil:
		wm.handledOK.Inc()
	default:
		wm.handledErr.Inc()
	}
}
