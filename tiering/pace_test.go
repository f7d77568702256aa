package tiering

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestPacedBodyCharges: a paced body charges the bytes each Read
// returned, and a read the limiter cannot allow within the context's
// deadline fails at once with the bytes it read.
func TestPacedBodyCharges(t *testing.T) {
	if rc := paced(context.Background(), io.NopCloser(nil), nil); rc == nil {
		t.Fatal("paced with no limiter returned nil")
	}
	lim := rate.NewLimiter(rate.Limit(1e-9), 10) // a bucket of 10 that never refills
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	body := paced(ctx, io.NopCloser(bytes.NewReader(make([]byte, 20))), lim)
	buf := make([]byte, 8)
	if n, err := body.Read(buf); n != 8 || err != nil {
		t.Fatalf("first read: %d, %v; want 8, nil", n, err)
	}
	if tok := lim.Tokens(); tok < 1.9 || tok > 2.1 {
		t.Fatalf("tokens after 8 bytes: %v, want 2", tok)
	}
	if n, err := body.Read(buf[:5]); n != 5 || err == nil {
		t.Fatalf("read beyond the bucket: %d, %v; want 5 and an error", n, err)
	}
	// Unlimited: nothing is charged.
	lim.SetLimit(rate.Inf)
	if n, err := body.Read(buf); n != 7 || err != nil {
		t.Fatalf("unlimited read: %d, %v; want 7, nil", n, err)
	}
}
