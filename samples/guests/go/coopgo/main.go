// coopgo: samples/coop in Go, through the Go guest SDK (guest-sdk/go): a
// long computation that checkpoints cooperatively, with no files and no
// instrumentation.
//
//	coopgo [TERMS] [PAD_MIB]
//
// It sums 1/k² for k = 1..=TERMS (default 2_000_000_000) in chunks of one
// million terms. Between chunks:
//
//   - it sets Progress to the fraction done;
//   - when the host asks for a checkpoint (a periodic one, or the first step
//     of a vacate), it saves where it stands and goes on;
//   - when the host asks it to vacate, it saves and exits with code 85
//     (HTCondor's checkpoint_exit_code convention), so it is run again.
//
// At start it resumes from the saved state, if any, and says so on standard
// error and in a log line for the job's event log. It also tries to set
// JobStatus, which the SDK refuses without asking the host, and says so on
// standard error. The sum is computed in a fixed order and saved with every
// bit, so standard output is the same however many times the job was
// interrupted, and the same as coop's. A bad argument exits with code 2.
//
// With PAD_MIB, each saved state carries that many MiB more of bytes derived
// from where it stands, checked when it is loaded: a state that comes back
// other than it was saved exits with code 3.
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"andes.dev/guest/andes"
)

const (
	defaultTerms = 2_000_000_000
	chunk        = 1_000_000
	// vacatedExitCode is the exit code of a job that saved its state and
	// wants to be run again.
	vacatedExitCode = 85
)

// encode is where the computation stands: (terms, terms done, sum).
func encode(terms, done uint64, sum float64) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint64(b, terms)
	binary.LittleEndian.PutUint64(b[8:], done)
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(sum))
	return b
}

func decode(b []byte) (terms, done uint64, sum float64, ok bool) {
	if len(b) != 24 {
		return 0, 0, 0, false
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]),
		math.Float64frombits(binary.LittleEndian.Uint64(b[16:])), true
}

// padding is what a state saved at done carries after its 24 bytes: n bytes
// from a simple generator (coop's).
func padding(done uint64, n int) []byte {
	x := done ^ 0x9e37_79b9_7f4a_7c15
	out := make([]byte, n)
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = byte(x)
	}
	return out
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	terms := uint64(defaultTerms)
	if len(args) > 0 {
		t, err := strconv.ParseUint(strings.ReplaceAll(args[0], "_", ""), 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "coopgo: TERMS must be a whole number, not `%s`: %v\n", args[0], err)
			return 2
		}
		terms = t
	}
	pad := 0
	if len(args) > 1 {
		m, err := strconv.Atoi(args[1])
		if err != nil || m < 0 || m > 256 {
			fmt.Fprintln(os.Stderr, "coopgo: PAD_MIB must be a whole number up to 256")
			return 2
		}
		pad = m << 20
	}

	// Identity and state belong to andes: the SDK refuses before asking.
	if err := andes.SetAttr("JobStatus", "4"); err != nil {
		fmt.Fprintln(os.Stderr, "coopgo: JobStatus not set:", err)
	}

	var done uint64
	var sum float64
	if state, ok := andes.LoadCheckpoint(); ok {
		head := state[:min(len(state), 24)]
		t, d, s, whole := decode(head)
		if whole && !bytes.Equal(state[24:], padding(d, len(state)-24)) {
			fmt.Fprintln(os.Stderr, "coopgo: the saved state came back damaged")
			return 3
		}
		if whole && t == terms && d <= terms {
			fmt.Fprintf(os.Stderr, "coopgo: resuming at term %d\n", d+1)
			andes.Info(fmt.Sprintf("resuming from a saved state at term %d", d+1))
			done, sum = d, s
		}
	}
	for done < terms {
		end := min(done+chunk, terms)
		for k := done + 1; k <= end; k++ {
			f := float64(k)
			sum += 1 / (f * f)
		}
		done = end
		_ = andes.SetProgress(float64(done) / float64(terms))
		vacate := andes.VacateRequested()
		if andes.CheckpointRequested() || vacate {
			state := append(encode(terms, done, sum), padding(done, pad)...)
			if err := andes.SaveCheckpoint(state); err != nil {
				fmt.Fprintln(os.Stderr, "coopgo: checkpoint not saved:", err)
			}
		}
		if vacate {
			fmt.Fprintf(os.Stderr, "coopgo: vacated after %d of %d terms\n", done, terms)
			return vacatedExitCode
		}
	}
	fmt.Printf("sum of 1/k^2 for k = 1..=%d: %s\n", terms, debugFloat(sum))
	return 0
}

// debugFloat writes a sum as Rust's {:?} writes it (coop's output): the
// shortest decimal that reads back exactly, with at least one digit after
// the point.
func debugFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}
