package andes

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// The Rust SDK's tests of attr.rs, in Go: the same names, literals and
// answers.

func TestWhitelist(t *testing.T) {
	for _, ok := range []string{"Progress", "progress", "PROGRESS", "ChirpResult", "chirp_x", "CHIRPY", "Chirp"} {
		if !IsSettable(ok) {
			t.Errorf("%s should be settable", ok)
		}
		if err := checkSettable(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, refused := range []string{"ClusterId", "ProcId", "Owner", "JobStatus", "HoldReason",
		"Requirements", "ProgressX", "XChirp", "Chir", "Progre\u017fs"} {
		if IsSettable(refused) {
			t.Errorf("%s should be refused", refused)
		}
		err := SetAttr(refused, "1")
		var ae *AttrError
		if !errors.As(err, &ae) {
			t.Fatalf("%s: %v is not an *AttrError", refused, err)
		}
		want := AttrNotSettable
		if !IsValidName(refused) {
			want = AttrInvalidName
		}
		if ae.Kind != want || ae.Name != refused {
			t.Errorf("%s: %#v", refused, ae)
		}
		if want == AttrNotSettable && (!strings.Contains(err.Error(), refused) || !strings.Contains(err.Error(), "Chirp")) {
			t.Errorf("%s: %v", refused, err)
		}
		if errors.Is(err, ErrNotUnderAndes) {
			t.Errorf("%s: refused locally, yet %v", refused, err)
		}
	}
}

func TestInvalidNamesAreRefusedLocally(t *testing.T) {
	for _, bad := range []string{"", "1Chirp", "Chirp.X", "Chirp X", "Chirp-X", "Chirpé", `"Progress"`, "Chirp\x00"} {
		if IsValidName(bad) {
			t.Errorf("%q should not be a name", bad)
		}
		var ae *AttrError
		if err := SetAttr(bad, "1"); !errors.As(err, &ae) || ae.Kind != AttrInvalidName || ae.Name != bad {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if !IsValidName("_x9") {
		t.Error("_x9 is a name")
	}
}

func TestEmptyValueIsRefusedLocally(t *testing.T) {
	var ae *AttrError
	if err := SetAttr("ChirpX", "  "); !errors.As(err, &ae) || ae.Kind != AttrInvalidValue {
		t.Errorf("%v", err)
	}
}

func TestProgressMustBeANumber(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		var ae *AttrError
		if err := SetProgress(bad); !errors.As(err, &ae) || ae.Kind != AttrInvalidValue || ae.Name != Progress {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if err := SetProgress(math.NaN()); err.Error() != "invalid value for attribute `Progress`: progress must be a number from 0 to 1, not NaN" {
		t.Error(err)
	}
}

func TestStringLiterals(t *testing.T) {
	for in, want := range map[string]string{
		"":                     `""`,
		"alice":                `"alice"`,
		`a"b\c`:                `"a\"b\\c"`,
		"1\n2\t3\r\b\f":        `"1\n2\t3\r\b\f"`,
		"\x00\x01\x7f":         `"\000\001\177"`,
		"it's":                 `"it's"`,
		"ü":                    `"\303\274"`,
		"é":                    `"\303\251"`,
		"say \"hi\"\n":         `"say \"hi\"\n"`,
		"\xff not UTF-8 \xc3(": `"\377 not UTF-8 \303("`,
	} {
		if got := StringLiteral(in); got != want {
			t.Errorf("StringLiteral(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestStringLiteralsRoundTrip(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x800; r++ {
		all.WriteRune(r) // surrogates are not below 0x800
	}
	var bytes []byte
	for b := 0; b < 256; b++ {
		bytes = append(bytes, byte(b))
	}
	for _, s := range []string{"", "plain", "q\"uote", "back\\slash\\", "\n\t\r\b\f\x00", "日本語 ✓", `\101`, all.String(), string(bytes)} {
		lit := StringLiteral(s)
		if got, ok := ParseStringLiteral(lit); !ok || got != s {
			t.Errorf("%s read back as %q, %v", lit, got, ok)
		}
	}
}

func TestParsingStringLiterals(t *testing.T) {
	for in, want := range map[string]string{
		`  "x"  `:      "x",
		`"\a\v\q\'\?"`: "\a\vq'?",
		`"\101\60\0"`:  "A0\x00",
		`"\477"`:       "'7",
		`"a\tb"`:       "a\tb",
	} {
		if got, ok := ParseStringLiteral(in); !ok || got != want {
			t.Errorf("ParseStringLiteral(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, notOne := range []string{`x`, `"x`, `x"`, `"`, `"a"+"b"`, `"a\"`, "42", `"a" + "b"`} {
		if got, ok := ParseStringLiteral(notOne); ok {
			t.Errorf("ParseStringLiteral(%s) = %q, want none", notOne, got)
		}
	}
}

func TestRealLiterals(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{0.42, "0.42"},
		{0.5, "0.5"},
		{1, "1.0"},
		{3, "3.0"},
		{-2.5, "-2.5"},
		{1e16, "1.0e16"},
		{1e20, "1.0e20"},
		{1.5e-7, "1.5e-7"},
		{1e-7, "1.0e-7"},
		{0.0001, "0.0001"},
		{0.00009, "9.0e-5"},
		{123456789, "123456789.0"},
		{9999999999999998, "9999999999999998.0"},
		{math.MaxFloat64, "1.7976931348623157e308"},
		{5e-324, "5.0e-324"},
		// A tie between two shortest decimals: Rust takes the larger, Go the even.
		{-1054958628518721.25, "-1054958628518721.3"},
		{math.NaN(), `real("NaN")`},
		{math.Inf(1), `real("INF")`},
		{math.Inf(-1), `real("-INF")`},
	} {
		if got := RealLiteral(c.in); got != c.want {
			t.Errorf("RealLiteral(%v) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, v := range []float64{0.1, 1.0 / 3.0, 6.02e23, -1e-300, 123456789.0, 2.2250738585072014e-308} {
		lit := RealLiteral(v)
		if !strings.Contains(lit, ".") {
			t.Errorf("%s has no point", lit)
		}
		if got, ok := ParseRealLiteral(lit); !ok || got != v {
			t.Errorf("%s read back as %v, %v", lit, got, ok)
		}
	}
}

func TestNumberLiterals(t *testing.T) {
	for in, want := range map[string]int64{" 42 ": 42, "-7": -7, "9223372036854775807": math.MaxInt64, "-0": 0} {
		if got, ok := ParseIntLiteral(in); !ok || got != want {
			t.Errorf("ParseIntLiteral(%q) = %v, %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "-", "+1", "1.0", "0x10", `"1"`, "1 + 1", "99999999999999999999", "1_000"} {
		if got, ok := ParseIntLiteral(bad); ok {
			t.Errorf("ParseIntLiteral(%q) = %v", bad, got)
		}
	}
	for in, want := range map[string]float64{"2": 2, "-2.5e3": -2500, "1.": 1, "1e400": math.Inf(1), "-1E-2": -0.01} {
		if got, ok := ParseRealLiteral(in); !ok || got != want {
			t.Errorf("ParseRealLiteral(%q) = %v, %v", in, got, ok)
		}
	}
	for _, bad := range []string{"inf", "NaN", "-inf", "", ".5", "x", `real("INF")`, "1.0.0", "0x1p3", "1_0"} {
		if got, ok := ParseRealLiteral(bad); ok {
			t.Errorf("ParseRealLiteral(%q) = %v", bad, got)
		}
	}
}

func TestLevelsAreNamedAsInTheWIT(t *testing.T) {
	for l, want := range []string{"debug", "info", "warn", "error"} {
		if Level(l).String() != want {
			t.Errorf("%d: %s", l, Level(l))
		}
	}
	if LevelDebug >= LevelInfo || LevelInfo >= LevelWarn || LevelWarn >= LevelError {
		t.Error("levels out of order")
	}
}
