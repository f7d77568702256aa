package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stratastream/strata/segment"
)

// TestMain lets this test binary stand for the loopback binary when run()
// starts it as the receiver process.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], "-receive") {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRunWrites(t *testing.T) {
	for _, child := range []bool{false, true} {
		res, err := run(32<<20, 1<<20, 64<<10, nil, 1, child)
		if err != nil {
			t.Fatalf("child %v: %v", child, err)
		}
		if res.Bytes != 32<<20 || res.MBPerS <= 0 || res.ReceiverProcess != child {
			t.Fatalf("child %v: %+v", child, res)
		}
		if child != (res.SenderCPUSPerGB > 0) {
			t.Fatalf("child %v: sender CPU %v", child, res.SenderCPUSPerGB)
		}
	}
}

func TestRunSendfileToReceiverProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), segment.PartitionDirName("t", 0))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, segment.SegmentFileName(0, segment.LogSuffix)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := logFiles(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	res, err := run(0, 1<<20, 1<<20, files, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "sendfile" || res.Bytes != 2*int64(len(data)) || res.SenderCPUSPerGB <= 0 {
		t.Fatalf("%+v", res)
	}
}
