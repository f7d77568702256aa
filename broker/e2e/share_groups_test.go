package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzShareTests are franz-go's share group tests run against a broker,
// in two runs of `go test`: the small ones together (they are parallel
// tests), then the ETL chain alone. Run beside the ETL chain's 500,000
// records and consumer kills, the small tests' own 5 to 30 s deadlines
// measured the machine's load more than the broker (a CI run on a loaded
// machine failed one).
var franzShareTests = [][]string{
	{"TestShareGroup", "TestShareGroupAckOnClose", "TestConsumeRegexShareSkipsInternal", "TestShareGroupOffsetsAdmin"},
	{"TestShareGroupETL"},
}

// TestShareGroupFranzGoSuite runs franz-go's share group tests against
// one broker process and against three with ZooKeeper (KGO_TEST_RF=3:
// the topics have three replicas, so share partitions, their share
// coordinators and the group coordinator are spread over the brokers).
// franz-go enables share groups only when ShareFetch and
// ShareAcknowledge v2 are advertised: the test fails if they are not.
// The tests set share.auto.offset.reset through
// IncrementalAlterConfigs on a GROUP resource.
func TestShareGroupFranzGoSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests do not run with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command to build franz-go's tests: %v", err)
	}
	t.Run("1broker", func(t *testing.T) {
		b := StartBroker(t)
		runFranzShareTests(t, []string{b.Addr}, 1)
	})
	t.Run("3brokers", func(t *testing.T) {
		c := StartCluster(t, 3)
		runFranzShareTests(t, c.LiveAddrs(), 3)
	})
}

// runFranzShareTests runs franzShareTests against the brokers at seeds,
// their topics created with replication factor rf, and fails unless
// every one passed.
func runFranzShareTests(t *testing.T, seeds []string, rf int) {
	t.Helper()
	if !servesShareGroups(t, seeds[0]) {
		t.Fatal("the broker does not advertise ShareFetch v2 and ShareAcknowledge v2")
	}
	for _, names := range franzShareTests {
		runFranzTests(t, seeds, rf, names)
	}
}

// runFranzTests runs franz-go's tests names in one `go test` against the
// brokers at seeds and fails unless every one passed.
func runFranzTests(t *testing.T, seeds []string, rf int, names []string) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "github.com/twmb/franz-go/pkg/kgo",
		"-run", "^("+strings.Join(names, "|")+")$", "-count=1", "-v")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+strings.Join(seeds, ","), "KGO_TEST_RF="+strconv.Itoa(rf))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("go test franz-go/pkg/kgo %v (build and run) took %v", names, time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("franz-go's share tests %v: %v\ntheir verdicts and test lines:\n%s\nthe output's end:\n%s",
			names, err, goTestVerdicts(string(out), 16384), tailString(string(out), 4096))
	}
	for _, name := range names {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Errorf("%s did not pass (skipped or not run):\n%s", name, tailString(string(out), 4096))
		}
	}
	t.Logf("franz-go:\n%s", tailString(string(out), 2048))
}

// goTestLine matches the lines of `go test -v` output that are a test's
// own: its verdict, its name as it starts, and its t.Log/t.Error lines
// (file:line: message), not the logs of the code under test.
var goTestLine = regexp.MustCompile(`^\s*(--- (FAIL|PASS|SKIP)|=== RUN|panic:|\S+_test\.go:\d+: )`)

// goTestVerdicts returns the lines of out that goTestLine matches, at
// most limit bytes of them, keeping the first: a failure's message comes
// before the client logs that follow it.
func goTestVerdicts(out string, limit int) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if !goTestLine.MatchString(line) {
			continue
		}
		if b.Len()+len(line)+1 > limit {
			b.WriteString("...\n")
			break
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// servesShareGroups reports whether the broker at addr advertises
// ShareFetch and ShareAcknowledge at v2.
func servesShareGroups(t *testing.T, addr string) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	v2 := 0
	for _, k := range resp.ApiKeys {
		if (k.ApiKey == 78 || k.ApiKey == 79) && k.MaxVersion >= 2 {
			v2++
		}
	}
	return v2 == 2
}
