// Package andes is the guest SDK for andes jobs written in Go: the Go
// counterpart of the Rust crate andes-guest (guest-sdk/ in the andes
// repository), with the same surface and the same rules.
//
// An andes job is a WebAssembly module built for WASI preview 1
// (GOOS=wasip1 GOARCH=wasm) and run by an andes execute host. Besides
// WASI, a job may import the functions of the andes:job WIT world
// (wit/job.wit); this package binds them:
//
//   - [VacateRequested], [VacateDeadline] and [VacateTimeLeft]: HTCondor's
//     soft kill. The machine is being reclaimed; save what you need and exit
//     before the deadline.
//   - [CheckpointRequested], [SaveCheckpoint] and [LoadCheckpoint]:
//     cooperative checkpoints, the job's own state as bytes, kept by the
//     host with the job and handed back after a restart.
//   - [GetAttr] and [SetAttr] with their typed forms: the job's own ClassAd,
//     as HTCondor's chirp. Only Progress and names beginning with Chirp may
//     be set; anything else is refused here, before asking the host.
//   - [Debug], [Info], [Warn] and [Error]: lines for the job's event log.
//
// A job that works in steps, reports its progress and stops cleanly when
// asked to vacate:
//
//	state, ok := andes.LoadCheckpoint() // after a restart: where it was
//	...
//	if andes.CheckpointRequested() || andes.VacateRequested() {
//		if err := andes.SaveCheckpoint(state); err != nil {
//			andes.Warn("not saved: " + err.Error())
//		}
//	}
//	if andes.VacateRequested() {
//		os.Exit(85) // the submit file's checkpoint_exit_code
//	}
//	_ = andes.SetProgress(0.5)
//	err := andes.SetAttr("JobStatus", "4") // an *AttrError, NotSettable; not sent
//
// # Outside andes
//
// Built for anything but wasip1 (go test, go run on your machine), the
// package behaves as a job that is not running under andes, as the Rust SDK
// does natively: nothing is ever requested, there is no deadline, GetAttr
// and LoadCheckpoint find nothing, SetAttr and SaveCheckpoint fail with
// [ErrNotUnderAndes] (after the local checks), and log lines go to standard
// error as "[andes LEVEL] message". A job's logic can be tested natively.
//
// # The binary interface
//
// The host functions are core-module imports (//go:wasmimport) lowered with
// the component model's canonical ABI, exactly as the Rust SDK's: option,
// result and string returns go through a return area the guest passes, and
// the strings and bytes the host returns are allocated by calling the
// guest's export cabi_realloc, which this package defines with
// //go:wasmexport (Go 1.24 or later). A module that imports this package
// exports cabi_realloc beside _start; the host calls it only during one of
// the package's own host calls, while the Go runtime is running.
package andes
