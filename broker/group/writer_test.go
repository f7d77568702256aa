package group

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratastream/strata/segment"
)

// failingLog is a Log whose appends fail with err.
type failingLog struct{ err error }

func (l failingLog) Append([]byte, segment.AppendOptions) (segment.AppendResult, error) {
	return segment.AppendResult{}, l.err
}
func (failingLog) ReadCopy(int64, int, int64) ([]byte, error) { return nil, nil }
func (failingLog) LogStartOffset() int64                      { return 0 }
func (failingLog) LogEndOffset() int64                        { return 0 }

// TestWriterLogLevel: a failed append is reported to every write; one the
// client retries (a failover: leadership moved, replication timed out) is
// logged as a warning, any other failure as an error.
func TestWriterLogLevel(t *testing.T) {
	for _, tc := range []struct {
		err   error
		level string
	}{
		{fmt.Errorf("commit: %w", kerr.NotLeaderForPartition), "level=WARN"},
		{fmt.Errorf("commit: %w", kerr.RequestTimedOut), "level=WARN"},
		{errors.New("segment: write: no space left on device"), "level=ERROR"},
		{fmt.Errorf("commit: %w", kerr.MessageTooLarge), "level=ERROR"},
	} {
		var out bytes.Buffer
		w := newWriter(failingLog{tc.err}, 1<<20, slog.New(slog.NewTextHandler(&out, nil)))
		got := make(chan error, 1)
		if err := w.enqueue([]byte("batch"), func(_ int64, err error) { got <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-got; !errors.Is(err, tc.err) {
			t.Errorf("%v: write done with %v", tc.err, err)
		}
		w.close()
		if line := out.String(); !strings.Contains(line, tc.level) {
			t.Errorf("%v: logged %q, want %s", tc.err, line, tc.level)
		}
	}
}
