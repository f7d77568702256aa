package producer

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitProducerID(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name      string
		version   int16
		txnID     *string
		pid       int64
		epoch     int16
		wantCode  int16
		wantPID   int64 // -2: a fresh id
		wantEpoch int16
	}{
		{name: "v0 new", version: 0, pid: -1, epoch: -1, wantPID: -2, wantEpoch: 0},
		{name: "v2 ignores stray fields", version: 2, pid: 1, epoch: 4, wantPID: -2, wantEpoch: 0},
		{name: "v4 new", version: 4, pid: -1, epoch: -1, wantPID: -2, wantEpoch: 0},
		{name: "v3 bump", version: 3, pid: 1, epoch: 4, wantPID: 1, wantEpoch: 5},
		{name: "v4 bump from 0", version: 4, pid: 0, epoch: 0, wantPID: 0, wantEpoch: 1},
		{name: "bump to the last epoch", version: 4, pid: 1, epoch: 32765, wantPID: 1, wantEpoch: 32766},
		{name: "epoch exhausted", version: 4, pid: 1, epoch: 32766, wantPID: -2, wantEpoch: 0},
		{name: "epoch max", version: 4, pid: 1, epoch: 32767, wantPID: -2, wantEpoch: 0},
		{name: "id not issued here", version: 4, pid: 1_000_000, epoch: 0, wantPID: -2, wantEpoch: 0},
		{name: "id without epoch", version: 4, pid: 1, epoch: -1, wantCode: kerr.InvalidRequest.Code, wantPID: -1, wantEpoch: -1},
		{name: "epoch without id", version: 4, pid: -1, epoch: 3, wantCode: kerr.InvalidRequest.Code, wantPID: -1, wantEpoch: -1},
		{name: "negative id", version: 4, pid: -7, epoch: 3, wantCode: kerr.InvalidRequest.Code, wantPID: -1, wantEpoch: -1},
		{name: "transactional", version: 4, txnID: str("tx"), pid: -1, epoch: -1, wantCode: kerr.CoordinatorNotAvailable.Code, wantPID: -1, wantEpoch: -1},
		{name: "transactional v0", version: 0, txnID: str("tx"), wantCode: kerr.CoordinatorNotAvailable.Code, wantPID: -1, wantEpoch: -1},
		{name: "transactional bump", version: 4, txnID: str("tx"), pid: 1, epoch: 1, wantCode: kerr.CoordinatorNotAvailable.Code, wantPID: -1, wantEpoch: -1},
		{name: "empty transactional id", version: 4, txnID: str(""), pid: -1, epoch: -1, wantCode: kerr.InvalidRequest.Code, wantPID: -1, wantEpoch: -1},
	}
	a := openAllocator(t, t.TempDir(), 3)
	// Issue ids 0 and 1 so that bumps of them are allowed.
	for range 2 {
		if _, err := a.Next(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{0: true, 1: true}
	for i, tt := range tests {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = tt.version, tt.txnID, tt.pid, tt.epoch
		resp := a.InitProducerID(req)
		if resp.Version != tt.version {
			t.Errorf("#%d %s: got response version %d, want %d", i, tt.name, resp.Version, tt.version)
		}
		if resp.ErrorCode != tt.wantCode || resp.ProducerEpoch != tt.wantEpoch {
			t.Errorf("#%d %s: got code %d epoch %d, want code %d epoch %d", i, tt.name, resp.ErrorCode, resp.ProducerEpoch, tt.wantCode, tt.wantEpoch)
		}
		switch {
		case tt.wantPID == -2:
			if seen[resp.ProducerID] || resp.ProducerID < 0 {
				t.Errorf("#%d %s: got id %d, want a fresh one", i, tt.name, resp.ProducerID)
			}
			seen[resp.ProducerID] = true
		case resp.ProducerID != tt.wantPID:
			t.Errorf("#%d %s: got id %d, want %d", i, tt.name, resp.ProducerID, tt.wantPID)
		}
	}
}

func TestInitProducerIDSourceFailure(t *testing.T) {
	a := NewIDAllocator(&badSource{}, nil)
	resp := a.InitProducerID(kmsg.NewPtrInitProducerIDRequest())
	if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code || resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
		t.Errorf("got code %d id %d epoch %d, want COORDINATOR_LOAD_IN_PROGRESS, -1, -1", resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
	}
	// Nothing was issued, so no bump is allowed either.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.ProducerID, req.ProducerEpoch = 4, 0, 0
	if resp := a.InitProducerID(req); resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("bump with no id issued: got code %d, want COORDINATOR_LOAD_IN_PROGRESS", resp.ErrorCode)
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{kerr.OutOfOrderSequenceNumber, 45},
		{kafkaErr(kerr.InvalidProducerEpoch, "x %d", 1), 47},
		{errors.New("plain"), -1},
	}
	for i, tt := range tests {
		if got := ErrorCode(tt.err); got != tt.want {
			t.Errorf("#%d: got %d, want %d", i, got, tt.want)
		}
	}
}
