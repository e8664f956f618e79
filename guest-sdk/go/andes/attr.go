package andes

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The job's own ClassAd: HTCondor's chirp.
//
// A job can read any attribute of its job ad, as ClassAd expression text,
// and set a few of them: Progress, and attributes whose names begin with
// Chirp. Names are case-insensitive, as everywhere in ClassAds. These are the
// rules of the Rust SDK's attr module, checked the same way.

// Progress is the attribute a job sets to report how far it has got: a real
// from 0 to 1.
const Progress = "Progress"

// ChirpPrefix is the prefix of the attributes a job may set freely.
const ChirpPrefix = "Chirp"

// AttrErrorKind says why an attribute could not be set.
type AttrErrorKind uint8

const (
	// AttrNotSettable: a job may not set this attribute; only Progress and
	// names beginning with Chirp are allowed. Identity and state
	// (ClusterId, ProcId, Owner, JobStatus, ...) belong to andes. Refused
	// without asking the host.
	AttrNotSettable AttrErrorKind = iota
	// AttrInvalidName: the name is not a ClassAd attribute name (a letter or
	// _, then letters, digits and _). Refused without asking the host.
	AttrInvalidName
	// AttrInvalidValue: the value cannot be written as a ClassAd expression
	// (an empty expression, a progress that is not a number). Refused
	// without asking the host.
	AttrInvalidValue
	// AttrRefused: the host refused the update and said why (the value
	// does not parse as a ClassAd expression, or is too large).
	AttrRefused
	// AttrNotUnderAndes: not running under andes (not built for wasip1), so
	// there is no job ad to update. The error wraps [ErrNotUnderAndes].
	AttrNotUnderAndes
)

// AttrError is the error of [SetAttr] and the typed setters.
type AttrError struct {
	Kind AttrErrorKind
	// Name is the attribute's name, as given.
	Name string
	// Reason is what is wrong with the value (AttrInvalidValue) or the
	// host's explanation (AttrRefused); empty otherwise.
	Reason string
}

func (e *AttrError) Error() string {
	switch e.Kind {
	case AttrNotSettable:
		return fmt.Sprintf("a job may not set attribute `%s`: only `%s` and attributes whose "+
			"names begin with `%s` (for example `ChirpResult`) can be set",
			e.Name, Progress, ChirpPrefix)
	case AttrInvalidName:
		return fmt.Sprintf("`%s` is not a ClassAd attribute name: use a letter or `_` followed "+
			"by letters, digits and `_`", e.Name)
	case AttrInvalidValue:
		return fmt.Sprintf("invalid value for attribute `%s`: %s", e.Name, e.Reason)
	case AttrRefused:
		return fmt.Sprintf("the host refused to set attribute `%s`: %s", e.Name, e.Reason)
	default:
		return "not running under andes: there is no job ad to update"
	}
}

// Unwrap returns [ErrNotUnderAndes] for an error of kind [AttrNotUnderAndes].
func (e *AttrError) Unwrap() error {
	if e.Kind == AttrNotUnderAndes {
		return ErrNotUnderAndes
	}
	return nil
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }
func isASCIIDigit(b byte) bool  { return b >= '0' && b <= '9' }

// IsValidName reports whether name is a plain ClassAd attribute name: a
// letter or _, then letters, digits and _ (ASCII only).
func IsValidName(name string) bool {
	if name == "" || !(isASCIILetter(name[0]) || name[0] == '_') {
		return false
	}
	for i := 1; i < len(name); i++ {
		b := name[i]
		if !(isASCIILetter(b) || isASCIIDigit(b) || b == '_') {
			return false
		}
	}
	return true
}

// equalFoldASCII compares two strings ignoring ASCII case only, as Rust's
// eq_ignore_ascii_case does (strings.EqualFold also folds other letters).
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	lower := func(c byte) byte {
		if c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// IsSettable reports whether a job may set attribute name: Progress, or a
// name beginning with Chirp, compared case-insensitively as ClassAd names
// are. The host applies the same rule; this lets a job find out without
// asking.
func IsSettable(name string) bool {
	return IsValidName(name) && (equalFoldASCII(name, Progress) ||
		len(name) >= len(ChirpPrefix) && equalFoldASCII(name[:len(ChirpPrefix)], ChirpPrefix))
}

// checkSettable checks a name before asking the host to set it.
func checkSettable(name string) error {
	if !IsValidName(name) {
		return &AttrError{Kind: AttrInvalidName, Name: name}
	}
	if !IsSettable(name) {
		return &AttrError{Kind: AttrNotSettable, Name: name}
	}
	return nil
}

// GetAttr returns one attribute of the job's ad as ClassAd expression text:
// "alice" with its quotes, 42, TARGET.Memory > 10. ok is false when the ad
// has no such attribute (and outside andes).
func GetAttr(name string) (expr string, ok bool) {
	return sysGet(name)
}

// GetAttrString returns an attribute whose value is a string literal,
// unquoted and unescaped; ok is false if it is missing or is not a single
// string literal.
func GetAttrString(name string) (string, bool) {
	text, ok := GetAttr(name)
	if !ok {
		return "", false
	}
	return ParseStringLiteral(text)
}

// GetAttrInt returns an attribute whose value is an integer literal
// (possibly negative); ok is false if it is missing or is anything else.
func GetAttrInt(name string) (int64, bool) {
	text, ok := GetAttr(name)
	if !ok {
		return 0, false
	}
	return ParseIntLiteral(text)
}

// GetAttrReal returns an attribute whose value is a real or integer literal;
// ok is false if it is missing or is anything else.
func GetAttrReal(name string) (float64, bool) {
	text, ok := GetAttr(name)
	if !ok {
		return 0, false
	}
	return ParseRealLiteral(text)
}

// GetAttrBool returns an attribute whose value is true or false (in any
// case); ok is false if it is missing or is anything else.
func GetAttrBool(name string) (value, ok bool) {
	text, ok := GetAttr(name)
	if !ok {
		return false, false
	}
	text = strings.TrimSpace(text)
	switch {
	case equalFoldASCII(text, "true"):
		return true, true
	case equalFoldASCII(text, "false"):
		return false, true
	}
	return false, false
}

// SetAttr sets attribute name of the job's ad to the ClassAd expression
// valueExpr, taken as it is: SetAttr("ChirpCount", "42"),
// SetAttr("ChirpName", `"alice"`). To set a plain value, prefer the typed
// setters, which write the literal.
//
// Only Progress and names beginning with Chirp may be set; anything else
// (ClusterId, ProcId, Owner, JobStatus, ...) fails with an [*AttrError] of
// kind [AttrNotSettable] without asking the host. The host parses the
// expression and may refuse it ([AttrRefused]).
func SetAttr(name, valueExpr string) error {
	if err := checkSettable(name); err != nil {
		return err
	}
	if strings.TrimSpace(valueExpr) == "" {
		return &AttrError{Kind: AttrInvalidValue, Name: name, Reason: "the expression is empty"}
	}
	refused, reason, here := sysSet(name, valueExpr)
	switch {
	case !here:
		return &AttrError{Kind: AttrNotUnderAndes, Name: name}
	case refused:
		return &AttrError{Kind: AttrRefused, Name: name, Reason: reason}
	}
	return nil
}

// SetProgress sets Progress to fraction, a real from 0 (just started) to 1
// (done). A finite value outside that range is clamped into it; NaN and
// infinities fail with [AttrInvalidValue].
func SetProgress(fraction float64) error {
	if math.IsNaN(fraction) || math.IsInf(fraction, 0) {
		return &AttrError{Kind: AttrInvalidValue, Name: Progress,
			Reason: "progress must be a number from 0 to 1, not " + rustFloat(fraction)}
	}
	if fraction < 0 {
		fraction = 0
	} else if fraction > 1 {
		fraction = 1
	}
	return SetAttr(Progress, RealLiteral(fraction))
}

// SetAttrInt sets attribute name to an integer literal.
func SetAttrInt(name string, value int64) error {
	return SetAttr(name, strconv.FormatInt(value, 10))
}

// SetAttrReal sets attribute name to a real literal (see [RealLiteral]).
func SetAttrReal(name string, value float64) error {
	return SetAttr(name, RealLiteral(value))
}

// SetAttrString sets attribute name to a string literal holding value (see
// [StringLiteral]): any text is allowed.
func SetAttrString(name, value string) error {
	return SetAttr(name, StringLiteral(value))
}

// SetAttrBool sets attribute name to true or false.
func SetAttrBool(name string, value bool) error {
	if value {
		return SetAttr(name, "true")
	}
	return SetAttr(name, "false")
}

// StringLiteral returns value as a ClassAd string literal: in double quotes,
// with " and \ escaped, the usual C escapes for control characters (\n, \t,
// \r, \b, \f), and every other byte outside printable ASCII as a three-digit
// octal escape, as HTCondor's unparser writes it. [ParseStringLiteral] of
// the literal gives back value exactly.
func StringLiteral(value string) string {
	var out strings.Builder
	out.Grow(len(value) + 2)
	out.WriteByte('"')
	for i := 0; i < len(value); i++ {
		b := value[i]
		switch {
		case b == '"':
			out.WriteString(`\"`)
		case b == '\\':
			out.WriteString(`\\`)
		case b == '\n':
			out.WriteString(`\n`)
		case b == '\t':
			out.WriteString(`\t`)
		case b == '\r':
			out.WriteString(`\r`)
		case b == 0x08:
			out.WriteString(`\b`)
		case b == 0x0c:
			out.WriteString(`\f`)
		case b >= 0x20 && b <= 0x7e:
			out.WriteByte(b)
		default:
			out.Write([]byte{'\\', '0' + b>>6, '0' + (b>>3)&7, '0' + b&7})
		}
	}
	out.WriteByte('"')
	return out.String()
}

// RealLiteral returns value as ClassAd expression text that evaluates to the
// same real: the shortest decimal that reads back exactly, always with a .
// so that it is a real and not an integer (1.0, 0.42, 1.0e-7), and
// real("NaN"), real("INF") or real("-INF") for values that have no literal.
// It writes what the Rust SDK's real_literal writes.
func RealLiteral(value float64) string {
	switch {
	case math.IsNaN(value):
		return `real("NaN")`
	case math.IsInf(value, 1):
		return `real("INF")`
	case math.IsInf(value, -1):
		return `real("-INF")`
	}
	text := rustFloat(value)
	if mantissa, exp, found := strings.Cut(text, "e"); found && !strings.Contains(mantissa, ".") {
		return mantissa + ".0e" + exp
	}
	return text
}

// rustFloat writes value as Rust's {:?} does: the shortest text that reads
// back exactly; in exponent form (1e16, 1.5e-7) when its magnitude is at
// least 1e16 or below 1e-4, otherwise in decimal with at least one digit
// after the point (3.0, 0.0001); inf, -inf and NaN.
func rustFloat(value float64) string {
	switch {
	case math.IsNaN(value):
		return "NaN"
	case math.IsInf(value, 1):
		return "inf"
	case math.IsInf(value, -1):
		return "-inf"
	}
	sign := ""
	if math.Signbit(value) {
		sign = "-"
	}
	abs := math.Abs(value)
	if abs == 0 {
		return sign + "0.0"
	}
	digits, exp := shortestDigits(abs)
	if abs < 1e-4 || abs >= 1e16 {
		text := digits[:1]
		if len(digits) > 1 {
			text += "." + digits[1:]
		}
		return sign + text + "e" + strconv.Itoa(exp)
	}
	if exp < 0 {
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	}
	if len(digits) <= exp+1 {
		return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	}
	return sign + digits[:exp+1] + "." + digits[exp+1:]
}

// shortestDigits returns the significant digits of the shortest decimal
// that reads back as abs (positive and finite) and the exponent of its first
// digit. When two such decimals are equally close to abs, it takes the
// larger, as Rust does; Go's strconv takes the even one.
func shortestDigits(abs float64) (string, int) {
	text := strconv.FormatFloat(abs, 'e', -1, 64) // d.ddde±XX
	mantissa, e, _ := strings.Cut(text, "e")
	exp, _ := strconv.Atoi(e)
	digits := strings.Replace(mantissa, ".", "", 1)
	n := len(digits)
	// abs exactly (a float64 has at most 767 significant digits), rounded
	// to n digits with ties away from zero.
	exact, e, _ := strings.Cut(strconv.FormatFloat(abs, 'e', 800, 64), "e")
	exactExp, _ := strconv.Atoi(e)
	exact = strings.Replace(exact, ".", "", 1)
	up := []byte(exact[:n])
	if exact[n] >= '5' {
		i := n - 1
		for ; i >= 0 && up[i] == '9'; i-- {
			up[i] = '0'
		}
		if i < 0 {
			up = append([]byte{'1'}, up[:n-1]...)
			exactExp++
		} else {
			up[i]++
		}
	}
	rounded := strings.TrimRight(string(up), "0")
	if rounded != digits {
		back, err := strconv.ParseFloat(rounded[:1]+"."+rounded[1:]+"e"+strconv.Itoa(exactExp), 64)
		if err == nil && back == abs {
			return rounded, exactExp
		}
	}
	return digits, exp
}

// ParseStringLiteral reads a ClassAd string literal, such as [GetAttr]
// returns for a string attribute: the text between the quotes with its
// escapes resolved. ok is false if text (less surrounding white space) is
// not one string literal. The bytes come back as they are (a Go string may
// hold any bytes), where the Rust SDK replaces invalid UTF-8.
func ParseStringLiteral(text string) (value string, ok bool) {
	text = strings.TrimSpace(text)
	if len(text) < 2 || text[0] != '"' || text[len(text)-1] != '"' {
		return "", false
	}
	inner := text[1 : len(text)-1]
	out := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); {
		b := inner[i]
		i++
		switch b {
		case '"':
			return "", false // an unescaped quote: more than one literal
		case '\\':
			if i >= len(inner) {
				return "", false // a trailing \ escaped the closing quote
			}
			e := inner[i]
			i++
			switch e {
			case 'n':
				out = append(out, '\n')
			case 't':
				out = append(out, '\t')
			case 'r':
				out = append(out, '\r')
			case 'b':
				out = append(out, 0x08)
			case 'f':
				out = append(out, 0x0c)
			case 'a':
				out = append(out, 0x07)
			case 'v':
				out = append(out, 0x0b)
			case '0', '1', '2', '3', '4', '5', '6', '7':
				// Up to three octal digits; a leading 4-7 allows two.
				maxDigits := 2
				if e <= '3' {
					maxDigits = 3
				}
				v := uint32(e - '0')
				for n := 1; n < maxDigits && i < len(inner) && inner[i] >= '0' && inner[i] <= '7'; n++ {
					v = v*8 + uint32(inner[i]-'0')
					i++
				}
				out = append(out, byte(v))
			default:
				// \\, \", \' and any other escape: the character itself.
				out = append(out, e)
			}
		default:
			out = append(out, b)
		}
	}
	return string(out), true
}

// ParseIntLiteral reads an integer literal, possibly with a leading -: 42,
// -7. ok is false for anything else, and for integers beyond int64.
func ParseIntLiteral(text string) (int64, bool) {
	text = strings.TrimSpace(text)
	digits := strings.TrimPrefix(text, "-")
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if !isASCIIDigit(digits[i]) {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(text, 10, 64)
	return v, err == nil
}

// ParseRealLiteral reads a real or integer literal, possibly with a leading
// -: 2, -2.5e3. ok is false for anything else, inf and NaN included (in a
// ClassAd those are attribute references); a literal beyond float64's range
// reads as an infinity, as in Rust.
func ParseRealLiteral(text string) (float64, bool) {
	text = strings.TrimSpace(text)
	body := strings.TrimPrefix(text, "-")
	if body == "" || !isASCIIDigit(body[0]) {
		return 0, false
	}
	for i := 0; i < len(body); i++ {
		if b := body[i]; !isASCIIDigit(b) && b != '.' && b != 'e' && b != 'E' && b != '+' && b != '-' {
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return v, true
}
