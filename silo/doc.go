// Package silo owns one Orrery silo: it opens the silo's partition replicas, joins the cluster
// as a member hosting partition grains, connects the replicas to the other silos' (the Raft
// transport, cluster/raftnet), runs the replica placement loop (each partition this silo leads
// moves toward its target replica set and leaderships even out, cluster/placement), runs the
// silo's due coordinator over the partitions this silo leads (its emission spans exported over
// OTLP when configured, package tracing), serves the admin HTTP endpoint
// (health, readiness, inspection, schedule pause/resume/trigger, each partition's replica view,
// Prometheus metrics from the silo's own registry, the web UI of silo/ui), exposes an
// in-process client, and shuts down gracefully (stop coordinating, hand leaderships over, close
// partitions, leave), fences itself when the cluster dropped it, and stops (closing its
// replicas) once the cluster has removed it from every partition's Raft group it held although,
// by its own view of the live silos, it belongs in those partitions' target sets; a silo that
// placement leaves out of every target set stays up as a spare. Failure detection timings
// come from a named profile (FailureProfiles).
package silo
