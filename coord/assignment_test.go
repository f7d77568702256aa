package coord

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func brokers(ids ...int32) []BrokerInfo {
	out := make([]BrokerInfo, len(ids))
	for i, id := range ids {
		out[i] = BrokerInfo{ID: id}
	}
	return out
}

func racked(m map[int32]string) []BrokerInfo {
	var out []BrokerInfo
	for id, r := range m {
		out = append(out, BrokerInfo{ID: id, Rack: r})
	}
	slices.SortFunc(out, func(a, b BrokerInfo) int { return int(a.ID - b.ID) })
	return out
}

// Kafka's AdminUtilsTest.testReplicaAssignment vector.
func TestAssignReplicasKafkaVector(t *testing.T) {
	got, err := AssignReplicas(brokers(0, 1, 2, 3, 4), 10, 3, AssignOptions{StartIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int32{{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1}, {0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2}}
	for p := range want {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("#%d: got %v, want %v", p, got[p], want[p])
		}
	}
}

func TestAssignReplicasSpread(t *testing.T) {
	tests := []struct {
		brokers           []BrokerInfo
		partitions, rf    int
		leadersPerBroker  int
		replicasPerBroker int
	}{
		{brokers(1, 2, 3), 3, 3, 1, 3},
		{brokers(1, 2, 3), 6, 2, 2, 4},
		{brokers(1, 2, 3), 3, 1, 1, 1},
		{brokers(10, 20, 30, 40), 8, 3, 2, 6},
		{brokers(5, 1, 3), 3, 3, 1, 3}, // unsorted input
	}
	for i, tc := range tests {
		for start := -1; start < len(tc.brokers); start++ {
			asg, err := AssignReplicas(tc.brokers, tc.partitions, tc.rf, AssignOptions{StartIndex: start})
			if err != nil {
				t.Fatalf("#%d start %d: %v", i, start, err)
			}
			lead, reps := map[int32]int{}, map[int32]int{}
			for p, r := range asg {
				if len(r) != tc.rf {
					t.Fatalf("#%d start %d: partition %d has %v", i, start, p, r)
				}
				for j, b := range r {
					if slices.Contains(r[:j], b) {
						t.Fatalf("#%d start %d: partition %d repeats a broker: %v", i, start, p, r)
					}
					reps[b]++
				}
				lead[r[0]]++
			}
			for _, b := range tc.brokers {
				if lead[b.ID] != tc.leadersPerBroker || reps[b.ID] != tc.replicasPerBroker {
					t.Errorf("#%d start %d: broker %d leads %d and holds %d, want %d and %d (%v)",
						i, start, b.ID, lead[b.ID], reps[b.ID], tc.leadersPerBroker, tc.replicasPerBroker, asg)
				}
			}
		}
	}
}

// Kafka's AdminUtilsTest.testGetRackAlternatedBrokerList vector.
func TestRackAlternatedBrokerList(t *testing.T) {
	list, _ := brokerList(racked(map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}), true)
	if want := []int32{0, 3, 1, 5, 4, 2}; !slices.Equal(list, want) {
		t.Fatalf("got %v, want %v", list, want)
	}
}

func TestAssignReplicasRackAware(t *testing.T) {
	tests := []struct {
		racks          map[int32]string
		partitions, rf int
		// distinct is the number of distinct racks each partition must span.
		distinct int
	}{
		{map[int32]string{0: "a", 1: "b", 2: "b", 3: "c", 4: "c", 5: "a"}, 6, 3, 3},
		{map[int32]string{0: "a", 1: "b", 2: "b", 3: "c", 4: "c", 5: "a"}, 12, 2, 2},
		{map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}, 4, 3, 2},
		{map[int32]string{1: "a", 2: "b", 3: "c"}, 3, 3, 3},
		{map[int32]string{1: "x", 2: "x", 3: "x"}, 3, 2, 1},
	}
	for i, tc := range tests {
		bs := racked(tc.racks)
		for start := 0; start < len(bs); start++ {
			asg, err := AssignReplicas(bs, tc.partitions, tc.rf, AssignOptions{StartIndex: start})
			if err != nil {
				t.Fatalf("#%d: %v", i, err)
			}
			lead := map[int32]int{}
			for p, r := range asg {
				seen := map[string]bool{}
				for _, b := range r {
					seen[tc.racks[b]] = true
				}
				if len(seen) != tc.distinct || len(r) != tc.rf {
					t.Errorf("#%d start %d: partition %d on %v spans %d racks, want %d", i, start, p, r, len(seen), tc.distinct)
				}
				lead[r[0]]++
			}
			for _, b := range bs {
				if want := tc.partitions / len(bs); lead[b.ID] != want {
					t.Errorf("#%d start %d: broker %d leads %d, want %d: %v", i, start, b.ID, lead[b.ID], want, asg)
				}
			}
		}
	}
}

func TestAssignReplicasErrors(t *testing.T) {
	tests := []struct {
		bs      []BrokerInfo
		p, rf   int
		wantErr bool
	}{
		{brokers(1, 2), 3, 3, true},                           // rf > brokers
		{brokers(1, 2), 0, 1, true},                           // no partitions
		{brokers(1, 2), 1, 0, true},                           // rf 0
		{nil, 1, 1, true},                                     // no brokers
		{racked(map[int32]string{1: "a", 2: ""}), 2, 1, true}, // racks on some brokers only
		{brokers(1), 1, 1, false},
	}
	for i, tc := range tests {
		_, err := AssignReplicas(tc.bs, tc.p, tc.rf, RandomStart)
		if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrInvalidAssignment)) {
			t.Errorf("#%d: got %v, want error %v", i, err, tc.wantErr)
		}
	}
}

func TestAssignAdditionalPartitions(t *testing.T) {
	bs := brokers(1, 2, 3)
	asg, _ := AssignReplicas(bs, 3, 2, AssignOptions{StartIndex: 1})
	ti := &TopicInfo{Partitions: make([]PartitionInfo, len(asg))}
	for i, r := range asg {
		ti.Partitions[i].Replicas = r
	}
	more, err := AssignReplicas(bs, 3, 2, AssignOptions{StartIndex: AddStartIndex(bs, ti), StartPartition: 3})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := AssignReplicas(bs, 6, 2, AssignOptions{StartIndex: 1})
	if got, want := fmt.Sprint(append(asg, more...)), fmt.Sprint(all); got != want {
		t.Fatalf("3+3 partitions %s, want the same as 6 at once %s", got, want)
	}
}
