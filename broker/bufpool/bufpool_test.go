package bufpool

import "testing"

// TestClasses holds the pool's classes to their rule: a buffer of at
// least the size asked for, the smallest power of two from 1 KiB, and
// none past the largest class.
func TestClasses(t *testing.T) {
	for _, tc := range []struct {
		n, cap int
	}{
		{1, 1 << 10},
		{1 << 10, 1 << 10},
		{1<<10 + 1, 2 << 10},
		{16 << 10, 16 << 10},
		{1<<20 - 7, 1 << 20},
		{1 << 24, 1 << 24},
		{1<<24 + 1, 1<<24 + 1}, // past the largest class: allocated
	} {
		b := Get(tc.n)
		if len(b) != tc.n || cap(b) != tc.cap {
			t.Fatalf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(b), cap(b), tc.n, tc.cap)
		}
		Put(b)
	}
	// A buffer of a capacity that is no class is dropped, not kept.
	Put(make([]byte, 3000))
	if b := Get(3000); cap(b) != 4<<10 {
		t.Fatalf("a 3000-byte buffer came back as a class buffer: cap %d", cap(b))
	}
	// The gRPC face hands out the same classes, of the length asked for.
	var g GRPC
	p := g.Get(5000)
	if len(*p) != 5000 || cap(*p) != 8<<10 {
		t.Fatalf("GRPC.Get(5000): len %d cap %d", len(*p), cap(*p))
	}
	g.Put(p)
}
