package broker

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// craftedFrameBytes is about how large the crafted frames of the decode
// bound tests are.
const craftedFrameBytes = 16 << 10

// allocatedBy returns the bytes f allocates, averaged over runs calls.
// The tests that use it do not run in parallel, so the process's other
// goroutines (the test framework's) allocate next to nothing meanwhile.
func allocatedBy(runs int, f func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// slicePaths returns the paths (field indexes, through struct fields and
// slice elements) of every slice field reachable from struct type t.
func slicePaths(t reflect.Type, prefix []int, depth int) [][]int {
	var out [][]int
	if depth > 6 {
		return nil
	}
	tagsType := reflect.TypeOf(kmsg.Tags{})
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Type == tagsType {
			continue
		}
		p := append(slices.Clone(prefix), i)
		switch f.Type.Kind() {
		case reflect.Slice:
			if f.Type.Elem().Kind() == reflect.Uint8 {
				continue // bytes: aliased, not decoded into elements
			}
			out = append(out, p)
			if e := f.Type.Elem(); e.Kind() == reflect.Struct {
				out = append(out, slicePaths(e, p, depth+1)...)
			}
		case reflect.Struct:
			out = append(out, slicePaths(f.Type, p, depth+1)...)
		}
	}
	return out
}

// fill sets the slice at path (below struct v) to n default elements,
// with one default element in every slice on the way.
func fill(v reflect.Value, path []int, n int) {
	f := v.Field(path[0])
	if f.Kind() == reflect.Struct {
		fill(f, path[1:], n)
		return
	}
	count := 1
	if len(path) == 1 {
		count = n
	}
	s := reflect.MakeSlice(f.Type(), count, count)
	for i := range count {
		if d, ok := s.Index(i).Addr().Interface().(interface{ Default() }); ok {
			d.Default()
		}
	}
	f.Set(s)
	if len(path) > 1 {
		fill(s.Index(0), path[1:], n)
	}
}

// craftedRequest builds a request of key and version whose slice at path
// holds n default elements: the least bytes per decoded element.
func craftedRequest(key, version int16, path []int, n int) kmsg.Request {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	fill(reflect.ValueOf(req).Elem(), path, n)
	return req
}

// frameOf encodes req as a request frame (correlation id 7) without its
// size prefix.
func frameOf(req kmsg.Request) []byte { return frameWithCorr(req, 7) }

// frameWithCorr encodes req as a request frame without its size prefix.
func frameWithCorr(req kmsg.Request, corr int32) []byte {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("crafted"))
	return fmtr.AppendRequest(nil, req, corr)[4:]
}

// TestDecodeAllocationBound crafts, for every API version served and
// every array in its request (nested ones too), frames of about 16 KiB
// whose array holds as many elements as fit, each encoded in its fewest
// bytes (the most decoded structure per byte that kmsg accepts: it refuses
// an array claiming more elements than the remaining bytes could hold);
// the same frame cut short by one byte (the array claim passes, decoding
// fails at the end); and a flexible request carrying the most unknown
// tagged fields. It measures the bytes parseRequest allocates and holds
// them to MaxDecodeAmplification times the frame's size.
func TestDecodeAllocationBound(t *testing.T) {
	if testing.Short() {
		t.Skip("measures allocations over every API version")
	}
	worst, worstWhat := 0.0, ""
	note := func(what string, frame []byte, alloc float64) {
		ratio := alloc / float64(len(frame))
		if ratio > worst {
			worst, worstWhat = ratio, what
		}
		if ratio > MaxDecodeAmplification {
			t.Errorf("%s: decoding a %d-byte frame allocated %.0f bytes, %.1f times its size; the bound is %d", what, len(frame), alloc, ratio, MaxDecodeAmplification)
		}
	}
	cases := 0
	for _, a := range servedAPIs() {
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(a.key)
			for _, path := range slicePaths(reflect.TypeOf(req).Elem(), nil, 0) {
				one, two := frameOf(craftedRequest(a.key, v, path, 1)), frameOf(craftedRequest(a.key, v, path, 2))
				per := len(two) - len(one)
				if per <= 0 {
					continue // the field is not in this version
				}
				n := max(1, (craftedFrameBytes-len(one))/per)
				frame := frameOf(craftedRequest(a.key, v, path, n))
				what := fmt.Sprintf("%s v%d %v×%d", kmsg.NameForKey(a.key), v, fieldNames(req, path), n)
				if _, err := parseRequest(frame); err != nil {
					t.Fatalf("%s: crafted frame does not parse: %v", what, err)
				}
				note(what, frame, allocatedBy(2, func() { _, _ = parseRequest(frame) }))
				cut := frame[:len(frame)-1]
				note(what+" cut short", cut, allocatedBy(2, func() { _, _ = parseRequest(cut) }))
				cases++
			}
		}
	}
	for _, frame := range unknownTagFrames(t) {
		note(fmt.Sprintf("ApiVersions v3 with unknown tags (%d bytes)", len(frame)), frame, allocatedBy(2, func() { _, _ = parseRequest(frame) }))
		cases++
	}
	t.Logf("DECODE_AMPLIFICATION worst=%.1f bound=%d cases=%d (%s)", worst, MaxDecodeAmplification, cases, worstWhat)
}

// fieldNames names the fields along path.
func fieldNames(req kmsg.Request, path []int) []string {
	t := reflect.TypeOf(req).Elem()
	var out []string
	for _, i := range path {
		f := t.Field(i)
		out = append(out, f.Name)
		t = f.Type
		if t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	return out
}

// unknownTagFrames returns ApiVersions v3 frames whose body ends in as
// many unknown tagged fields (distinct keys, empty values) as fit in
// about 16 KiB, with keys of one, two and three varint bytes.
func unknownTagFrames(t *testing.T) [][]byte {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	base := frameOf(req)
	if base[len(base)-1] != 0 {
		t.Fatalf("ApiVersions v3 body does not end in an empty tag section: %x", base)
	}
	var out [][]byte
	for _, firstKey := range []uint64{0, 1 << 7, 1 << 14} {
		n := uint64(craftedFrameBytes / 4)
		frame := slices.Clone(base[:len(base)-1])
		frame = binary.AppendUvarint(frame, n)
		for k := firstKey; k < firstKey+n; k++ {
			frame = binary.AppendUvarint(frame, k)
			frame = binary.AppendUvarint(frame, 0)
		}
		if _, err := parseRequest(frame); err != nil {
			t.Fatalf("unknown-tags frame does not parse: %v", err)
		}
		out = append(out, frame)
	}
	return out
}
