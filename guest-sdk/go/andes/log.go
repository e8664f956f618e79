package andes

import "fmt"

// Level is how important a log line is: the WIT enum andes:job/log.level.
type Level uint8

// The levels, from the least important; their values are the enum's
// indexes in the WIT.
const (
	// LevelDebug is detail useful when debugging the job.
	LevelDebug Level = iota
	// LevelInfo is normal progress.
	LevelInfo
	// LevelWarn is something unexpected that the job worked around.
	LevelWarn
	// LevelError is something that failed.
	LevelError
)

// String returns the level's name in lower case, as the WIT spells it:
// debug, info, warn or error.
func (l Level) String() string {
	switch l {
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	case LevelError:
		return "error"
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// Log writes one line at the given level to the job's event log on the
// submit side. Unlike standard output and standard error, which come back as
// files when the job ends, these lines travel with the host's updates while
// the job runs; keep them short. Outside andes they go to standard error as
// "[andes LEVEL] message". A level beyond [LevelError] is written as an
// error.
func Log(level Level, message string) {
	sysWrite(min(level, LevelError), message)
}

// Debug writes one line at [LevelDebug].
func Debug(message string) { Log(LevelDebug, message) }

// Info writes one line at [LevelInfo].
func Info(message string) { Log(LevelInfo, message) }

// Warn writes one line at [LevelWarn].
func Warn(message string) { Log(LevelWarn, message) }

// Error writes one line at [LevelError].
func Error(message string) { Log(LevelError, message) }
