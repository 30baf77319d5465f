// Package grains holds no code: its subpackages are Orrery's deterministic core (the schedule,
// saga and queue state machines, their listing, and the batch applier, with their key layout
// and view), and its test is the lint that keeps that core pure (DESIGN §2.1, STYLE A.1).
package grains
