//go:build wasip1

// The host functions of wit/job.wit as core-module imports, lowered with
// the component model's canonical ABI as the Rust SDK's bindings lower them
// (guest-sdk/README.md has the core signatures): strings passed in are
// (pointer, length) pairs; option, result and string returns are written
// by the host into a return area whose address the guest passes; strings
// and bytes the host returns are allocated by the guest's export
// cabi_realloc.

package andes

import (
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

//go:wasmimport andes:job/control@0.1.0 vacate-requested
func hostVacateRequested() uint32

//go:wasmimport andes:job/control@0.1.0 deadline
func hostDeadline(ret unsafe.Pointer)

//go:wasmimport andes:job/attributes@0.1.0 get
func hostGet(name string, ret unsafe.Pointer)

//go:wasmimport andes:job/attributes@0.1.0 set
func hostSet(name, value string, ret unsafe.Pointer)

//go:wasmimport andes:job/log@0.1.0 write
func hostWrite(level uint32, message string)

//go:wasmimport andes:job/checkpoint@0.1.0 checkpoint-requested
func hostCheckpointRequested() uint32

//go:wasmimport andes:job/checkpoint@0.1.0 save
func hostSave(state unsafe.Pointer, length uint32, ret unsafe.Pointer)

//go:wasmimport andes:job/checkpoint@0.1.0 load
func hostLoad(ret unsafe.Pointer)

var (
	// mu serializes the calls that use retArea and allocs.
	mu sync.Mutex
	// retArea is where the host writes option and result returns: 16 bytes
	// for option<u64> (8-byte aligned) and 12 for option<string>, in memory
	// the garbage collector never moves (Go's does not move heap objects).
	retArea [2]uint64
	// allocs holds what cabi_realloc handed the host during the current
	// call, by address, so that the collector keeps it until the call's
	// result is read.
	allocs = map[uintptr][]byte{}
)

// cabiRealloc is the allocator the canonical ABI calls for the strings and
// bytes the host returns: (old pointer, old size, alignment, new size) ->
// pointer. The host calls it only during a call of this package's imports,
// with the Go runtime running.
//
//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	if align == 0 {
		align = 1
	}
	if newSize == 0 {
		return align // any non-null address will do for nothing
	}
	buf := make([]byte, newSize+align-1)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	skip := (uintptr(align) - p%uintptr(align)) % uintptr(align)
	buf = buf[skip : skip+uintptr(newSize)]
	p += skip
	if oldPtr != 0 && oldSize != 0 {
		copy(buf, taken(oldPtr, min(oldSize, newSize)))
	}
	allocs[p] = buf
	return uint32(p)
}

// taken returns the length bytes at ptr that the host returned: the buffer
// cabi_realloc made for them.
func taken(ptr, length uint32) []byte {
	if length == 0 {
		return []byte{}
	}
	if buf, ok := allocs[uintptr(ptr)]; ok && uint32(len(buf)) >= length {
		return buf[:length:length]
	}
	// Not ours (the host would have to have written into memory it was not
	// given): copy what is there.
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Add(nil, ptr)), length)...)
}

func retByte(off uintptr) byte {
	return *(*byte)(unsafe.Add(unsafe.Pointer(&retArea), off))
}

func retU32(off uintptr) uint32 {
	return *(*uint32)(unsafe.Add(unsafe.Pointer(&retArea), off))
}

// retString reads an option<string> or result<_, string> from the return
// area: the discriminant at +0, the string's pointer at +4, its length at +8.
func retString() (string, bool) {
	if retByte(0) == 0 {
		return "", false
	}
	b := taken(retU32(4), retU32(8))
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}

// valid makes s valid UTF-8, which the host requires of every string.
func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func sysVacateRequested() bool { return hostVacateRequested() != 0 }

func sysCheckpointRequested() bool { return hostCheckpointRequested() != 0 }

func sysDeadline() (uint64, bool) {
	mu.Lock()
	defer mu.Unlock()
	hostDeadline(unsafe.Pointer(&retArea))
	if retByte(0) == 0 {
		return 0, false
	}
	return retArea[1], true
}

func sysGet(name string) (string, bool) {
	mu.Lock()
	defer mu.Unlock()
	defer clear(allocs)
	hostGet(valid(name), unsafe.Pointer(&retArea))
	return retString()
}

func sysSet(name, value string) (refused bool, reason string, here bool) {
	mu.Lock()
	defer mu.Unlock()
	defer clear(allocs)
	hostSet(valid(name), valid(value), unsafe.Pointer(&retArea))
	reason, refused = retString()
	return refused, reason, true
}

func sysSave(state []byte) error {
	mu.Lock()
	defer mu.Unlock()
	defer clear(allocs)
	hostSave(unsafe.Pointer(unsafe.SliceData(state)), uint32(len(state)), unsafe.Pointer(&retArea))
	if reason, refused := retString(); refused {
		return &SaveError{Reason: reason}
	}
	return nil
}

func sysLoad() ([]byte, bool) {
	mu.Lock()
	defer mu.Unlock()
	defer clear(allocs)
	hostLoad(unsafe.Pointer(&retArea))
	if retByte(0) == 0 {
		return nil, false
	}
	return taken(retU32(4), retU32(8)), true
}

func sysWrite(level Level, message string) {
	hostWrite(uint32(level), valid(message))
}
