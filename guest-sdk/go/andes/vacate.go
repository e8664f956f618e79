package andes

import (
	"math"
	"time"
)

// VacateRequested reports whether the execute host has asked this job to
// vacate.
//
// This is HTCondor's soft kill (SIGTERM at vacate): the machine is being
// reclaimed, and a job that sees true should save what it needs (see
// [VacateTimeLeft] for how long it has) and exit. Once true it stays true.
// The call is cheap: a job may poll it every few milliseconds of work.
//
// Outside andes it is always false.
func VacateRequested() bool {
	return sysVacateRequested()
}

// VacateDeadline returns, when a vacate is pending, the time after which the
// host kills the job. ok is false when no vacate has been requested (and
// outside andes), or in the unlikely case that the host's deadline is beyond
// what a [time.Time] holds.
func VacateDeadline() (deadline time.Time, ok bool) {
	secs, ok := VacateDeadlineSecs()
	if !ok || secs > math.MaxInt64 {
		return time.Time{}, false
	}
	return time.Unix(int64(secs), 0), true
}

// VacateDeadlineSecs is [VacateDeadline] as the host gives it: seconds since
// the Unix epoch.
func VacateDeadlineSecs() (secs uint64, ok bool) {
	return sysDeadline()
}

// VacateTimeLeft returns, when a vacate is pending, how long until the host
// kills the job, by this job's clock (zero once the deadline has passed). ok
// is false when no vacate has been requested.
func VacateTimeLeft() (left time.Duration, ok bool) {
	deadline, ok := VacateDeadline()
	if !ok {
		return 0, false
	}
	return max(time.Until(deadline), 0), true
}
