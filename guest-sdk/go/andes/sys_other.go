//go:build !wasip1

// Outside andes: stand-ins that behave as "not running under andes", as the
// Rust SDK's do on targets other than wasm32.

package andes

import (
	"fmt"
	"os"
)

func sysVacateRequested() bool { return false }

func sysCheckpointRequested() bool { return false }

func sysDeadline() (uint64, bool) { return 0, false }

func sysSave([]byte) error { return ErrNotUnderAndes }

func sysLoad() ([]byte, bool) { return nil, false }

func sysGet(string) (string, bool) { return "", false }

// sysSet: no host to ask.
func sysSet(string, string) (refused bool, reason string, here bool) { return false, "", false }

func sysWrite(level Level, message string) {
	fmt.Fprintf(os.Stderr, "[andes %s] %s\n", level, message)
}
