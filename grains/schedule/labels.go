package schedule

import orreryv1 "github.com/orreryhq/orrery/api/v1"

// HasLabels reports whether def carries labels: a behaviour of apply version 10.
func HasLabels(def *orreryv1.ScheduleDefinition) bool { return len(def.GetLabels()) > 0 }
