package orrery

import "context"

// errDeadline is what AsError maps to CodeDeadlineExceeded.
var errDeadline = context.DeadlineExceeded
