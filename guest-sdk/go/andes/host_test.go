//go:build wasip1

package andes

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// These run under a real host: samples/guests/build.sh builds them into
// andes_go_test.wasm and tests/system/guests.rs runs it with `andes run`,
// so every import's lowering (arguments in, return areas and cabi_realloc
// out) is checked against the host, not against a stand-in.

func TestUnderAndesRunNothingIsRequested(t *testing.T) {
	if VacateRequested() || CheckpointRequested() {
		t.Error("nothing was requested")
	}
	if d, ok := VacateDeadline(); ok {
		t.Errorf("no vacate is pending, yet a deadline: %v", d)
	}
	if _, ok := VacateTimeLeft(); ok {
		t.Error("no vacate is pending, yet time left")
	}
}

func TestAttributesGoThroughTheHost(t *testing.T) {
	cmd, ok := GetAttrString("Cmd")
	if !ok || !strings.HasSuffix(cmd, ".wasm") {
		t.Errorf("Cmd: %q, %v", cmd, ok)
	}
	if v, ok := GetAttr("NoSuchAttribute"); ok {
		t.Errorf("NoSuchAttribute: %q", v)
	}
	for _, s := range []string{"", "plain", `say "hi"` + "\n\té\\", strings.Repeat("x", 5000)} {
		if err := SetAttrString("ChirpText", s); err != nil {
			t.Fatal(err)
		}
		if got, ok := GetAttrString("chirptext"); !ok || got != s {
			t.Errorf("ChirpText: set %q, read %q, %v", s, got, ok)
		}
	}
	if err := SetAttrInt("ChirpN", -42); err != nil {
		t.Fatal(err)
	}
	if n, ok := GetAttrInt("ChirpN"); !ok || n != -42 {
		t.Errorf("ChirpN: %v, %v", n, ok)
	}
	if err := SetAttrReal("ChirpR", 1e-7); err != nil {
		t.Fatal(err)
	}
	if r, ok := GetAttrReal("ChirpR"); !ok || r != 1e-7 {
		t.Errorf("ChirpR: %v, %v", r, ok)
	}
	if err := SetAttrBool("ChirpB", true); err != nil {
		t.Fatal(err)
	}
	if b, ok := GetAttrBool("ChirpB"); !ok || !b {
		t.Errorf("ChirpB: %v, %v", b, ok)
	}
	if err := SetProgress(2); err != nil {
		t.Fatal(err)
	}
	if p, ok := GetAttrReal(Progress); !ok || p != 1 {
		t.Errorf("Progress: %v, %v", p, ok)
	}
	// The host's refusal comes back with its reason, through cabi_realloc.
	err := SetAttr("ChirpBad", "1 +")
	var ae *AttrError
	if !errors.As(err, &ae) || ae.Kind != AttrRefused || !strings.Contains(ae.Reason, "ChirpBad") {
		t.Errorf("ChirpBad: %v", err)
	}
	// Refused here, never sent.
	if err := SetAttr("JobStatus", "4"); !errors.As(err, &ae) || ae.Kind != AttrNotSettable {
		t.Errorf("JobStatus: %v", err)
	}
	// Invalid UTF-8 is made valid before it reaches the host.
	if err := SetAttr("ChirpU", "\"a\xffb\""); err != nil {
		t.Errorf("ChirpU: %v", err)
	}
}

func TestCheckpointsGoThroughTheHost(t *testing.T) {
	if _, ok := LoadCheckpoint(); ok {
		t.Error("a first start has nothing to load")
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for _, state := range [][]byte{{}, []byte("state"), big} {
		if err := SaveCheckpoint(state); err != nil {
			t.Fatal(err)
		}
		got, ok := LoadCheckpoint()
		if !ok || got == nil || !bytes.Equal(got, state) {
			t.Errorf("saved %d bytes, loaded %d, %v", len(state), len(got), ok)
		}
	}
	err := SaveCheckpoint(make([]byte, 64<<20+1))
	var se *SaveError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "larger") {
		t.Errorf("a state past 64 MiB: %v", err)
	}
	if got, ok := LoadCheckpoint(); !ok || !bytes.Equal(got, big) {
		t.Error("a refused save replaced the last one")
	}
}

func TestLogLinesGoToTheHost(t *testing.T) {
	Debug("go sdk: debug")
	Info("go sdk: info")
	Warn("go sdk: warn")
	Error("go sdk: error \xff")
}
