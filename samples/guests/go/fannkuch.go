// fannkuch: the fannkuch-redux benchmark, with its results written to files.
//
//	fannkuch [N]
//
// Counts the flips of every permutation of 1..N (default 10) in blocks,
// appending one line per block to fannkuch.log, keeping the running totals
// in a scratch file it rewrites in place (seek, write, read back) and
// removes at the end, then writes result.txt with os.WriteFile and prints
// the checksum and the maximum number of flips. Plain Go and its standard
// library: nothing here knows about andes. Built with GOOS=wasip1 and
// natively from the same source, both builds write the same bytes.
package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
)

const blocks = 24

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fannkuch:", err)
	os.Exit(1)
}

// perm returns the idx-th permutation of 0..n-1 in factorial order.
func perm(n int, idx int, fact []int) ([]int, []int) {
	p := make([]int, n)
	count := make([]int, n)
	for i := range p {
		p[i] = i
	}
	tmp := make([]int, n)
	for i := n - 1; i > 0; i-- {
		d := idx / fact[i]
		count[i] = d
		idx %= fact[i]
		copy(tmp, p)
		for j := 0; j <= i; j++ {
			if j+d <= i {
				p[j] = tmp[j+d]
			} else {
				p[j] = tmp[j+d-i-1]
			}
		}
	}
	return p, count
}

// block counts the flips of permutations [lo, hi): the checksum adds the
// flips of even-numbered permutations and subtracts those of odd ones.
func block(n, lo, hi int, fact []int) (checksum, maxFlips int) {
	p, count := perm(n, lo, fact)
	pp := make([]int, n)
	for idx := lo; idx < hi; idx++ {
		copy(pp, p)
		flips := 0
		for first := pp[0]; first != 0; first = pp[0] {
			for i, j := 0, first; i < j; i, j = i+1, j-1 {
				pp[i], pp[j] = pp[j], pp[i]
			}
			flips++
		}
		maxFlips = max(maxFlips, flips)
		if idx%2 == 0 {
			checksum += flips
		} else {
			checksum -= flips
		}
		// The next permutation in the same order as perm's.
		first := p[1]
		p[1] = p[0]
		p[0] = first
		for i := 1; ; {
			count[i]++
			if count[i] <= i {
				break
			}
			count[i] = 0
			i++
			if i >= n {
				break
			}
			next := p[1]
			p[0] = next
			for j := 1; j < i; j++ {
				p[j] = p[j+1]
			}
			p[i] = first
			first = next
		}
	}
	return checksum, maxFlips
}

func main() {
	n := 10
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v < 3 || v > 12 {
			fmt.Fprintln(os.Stderr, "usage: fannkuch [N], N from 3 to 12")
			os.Exit(2)
		}
		n = v
	}
	fact := make([]int, n+1)
	fact[0] = 1
	for i := 1; i <= n; i++ {
		fact[i] = fact[i-1] * i
	}
	logf, err := os.OpenFile("fannkuch.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fail(err)
	}
	scratch, err := os.OpenFile("totals.bin", os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		fail(err)
	}
	total := fact[n]
	step := (total + blocks - 1) / blocks
	checksum, maxFlips := 0, 0
	for b := 0; b*step < total; b++ {
		lo, hi := b*step, min((b+1)*step, total)
		c, m := block(n, lo, hi, fact)
		checksum += c
		maxFlips = max(maxFlips, m)
		if _, err := fmt.Fprintf(logf, "block %d: permutations %d..%d, checksum %d, max flips %d\n", b+1, lo, hi, c, m); err != nil {
			fail(err)
		}
		// Keep the running totals in place at the scratch file's start.
		var buf [16]byte
		binary.LittleEndian.PutUint64(buf[:8], uint64(int64(checksum)))
		binary.LittleEndian.PutUint64(buf[8:], uint64(maxFlips))
		if _, err := scratch.WriteAt(buf[:], 0); err != nil {
			fail(err)
		}
	}
	var buf [16]byte
	if _, err := scratch.Seek(0, io.SeekStart); err != nil {
		fail(err)
	}
	if _, err := io.ReadFull(scratch, buf[:]); err != nil {
		fail(err)
	}
	if int64(binary.LittleEndian.Uint64(buf[:8])) != int64(checksum) {
		fail(fmt.Errorf("totals.bin holds %d, not the checksum %d", int64(binary.LittleEndian.Uint64(buf[:8])), checksum))
	}
	scratch.Close()
	if err := os.Remove("totals.bin"); err != nil {
		fail(err)
	}
	if err := logf.Close(); err != nil {
		fail(err)
	}
	result := fmt.Sprintf("%d\nPfannkuchen(%d) = %d\n", checksum, n, maxFlips)
	if err := os.WriteFile("result.txt", []byte(result), 0o644); err != nil {
		fail(err)
	}
	fmt.Print(result)
}
