// Package silo owns one Orrery silo: it joins the cluster as a member hosting partition
// grains, runs the silo's due coordinator over the partitions the topology places on it,
// serves the admin HTTP endpoint (health, readiness, inspection), exposes an in-process
// client, and shuts down gracefully (stop coordinating, close partitions, leave) or fences
// itself when the cluster dropped it.
package silo
