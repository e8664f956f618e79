//go:build !wasip1

package andes

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// Built natively, the package is a job not running under andes, as the
// Rust SDK is on targets other than wasm32.

func TestNativeBuildIsNotUnderAndes(t *testing.T) {
	if VacateRequested() || CheckpointRequested() {
		t.Error("nothing is requested outside andes")
	}
	if _, ok := VacateDeadline(); ok {
		t.Error("no deadline outside andes")
	}
	if _, ok := VacateDeadlineSecs(); ok {
		t.Error("no deadline outside andes")
	}
	if _, ok := VacateTimeLeft(); ok {
		t.Error("no time left outside andes")
	}
	if _, ok := LoadCheckpoint(); ok {
		t.Error("nothing to load outside andes")
	}
	if err := SaveCheckpoint([]byte("x")); !errors.Is(err, ErrNotUnderAndes) {
		t.Errorf("save: %v", err)
	}
	if _, ok := GetAttr("Owner"); ok {
		t.Error("no job ad outside andes")
	}
	if _, ok := GetAttrString("Owner"); ok {
		t.Error("no job ad outside andes")
	}
	for what, err := range map[string]error{
		"SetAttr":       SetAttr("ChirpX", "1"),
		"SetProgress":   SetProgress(0.5),
		"SetAttrInt":    SetAttrInt("ChirpX", 1),
		"SetAttrString": SetAttrString("ChirpX", "x"),
		"SetAttrBool":   SetAttrBool("ChirpX", true),
		"SetAttrReal":   SetAttrReal("ChirpX", 1.5),
	} {
		var ae *AttrError
		if !errors.As(err, &ae) || ae.Kind != AttrNotUnderAndes || !errors.Is(err, ErrNotUnderAndes) {
			t.Errorf("%s: %v", what, err)
		}
	}
	// The local checks come first.
	var ae *AttrError
	if err := SetAttrInt("Owner", 1); !errors.As(err, &ae) || ae.Kind != AttrNotSettable {
		t.Errorf("Owner: %v", err)
	}
}

func TestNativeLogLinesGoToStandardError(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	Debug("d")
	Info("i")
	Warn("w")
	Error("e")
	Log(Level(9), "beyond")
	os.Stderr = saved
	w.Close()
	got, _ := io.ReadAll(r)
	want := "[andes debug] d\n[andes info] i\n[andes warn] w\n[andes error] e\n[andes error] beyond\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !strings.HasPrefix(string(got), "[andes debug]") {
		t.Error(string(got))
	}
}
