package andes

import "errors"

// ErrNotUnderAndes is the error of a call that needs the host when the
// program is not running under andes (not built for wasip1): there is no
// host to keep a checkpoint or a job ad to update. [SaveCheckpoint] returns
// it as it is; [SetAttr] returns an [*AttrError] of kind [AttrNotUnderAndes]
// that wraps it, so errors.Is(err, ErrNotUnderAndes) holds for both.
var ErrNotUnderAndes = errors.New("not running under andes")

// SaveError is the error of a checkpoint the host refused.
type SaveError struct {
	// Reason is the host's explanation (too large, say).
	Reason string
}

func (e *SaveError) Error() string {
	return "the host refused the checkpoint: " + e.Reason
}

// CheckpointRequested reports whether the host asks the job to checkpoint
// now (periodically, or before a vacate). It stays true until the job calls
// [SaveCheckpoint]. Cheap: poll it between steps of work. Outside andes it
// is always false.
func CheckpointRequested() bool {
	return sysCheckpointRequested()
}

// SaveCheckpoint stores state as the job's checkpoint, replacing the
// previous one; the host keeps it with the job, durably, and [LoadCheckpoint]
// returns it when the job runs again. It fails with a [*SaveError] when the
// host refuses it, and with [ErrNotUnderAndes] outside andes.
func SaveCheckpoint(state []byte) error {
	return sysSave(state)
}

// LoadCheckpoint returns the job's last saved state: after a restart, what
// it saved before (in this run, its latest save). ok is false on a first
// start and outside andes; a saved empty state is an empty, non-nil slice
// with ok true.
func LoadCheckpoint() (state []byte, ok bool) {
	return sysLoad()
}
