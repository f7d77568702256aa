package broker

import (
	"fmt"
	"io"
	"strings"
)

// Kafka39API is one row of the API conformance table: a client-facing
// API key of Kafka 3.9 in ZooKeeper mode, the versions Kafka 3.9 serves
// (the "validVersions" of its clients/src/main/resources/common/message/
// <Name>Request.json at tag 3.9.0, whose "listeners" include zkBroker),
// and the versions Strata serves. The broker-to-broker and
// controller-only keys of that list (LeaderAndIsr, StopReplica,
// UpdateMetadata, ControlledShutdown, AlterPartition, Envelope,
// AllocateProducerIds) are left out: no client sends them.
// WriteTxnMarkers is in: Strata serves it on the client listener, as
// Kafka does, for transaction coordinators.
//
// TestAPIConformance holds the broker's ApiVersions answer against it and
// sends every served version; docs/compatibility.md's API table is
// generated from it (WriteAPITable).
type Kafka39API struct {
	Key  int16
	Name string
	// KafkaMin and KafkaMax are Kafka 3.9's version range.
	KafkaMin, KafkaMax int16
	// StrataMin and StrataMax are what Strata advertises; both -1 when
	// the key is not served.
	StrataMin, StrataMax int16
	// Issue is the open issue that owns the difference from Kafka's
	// range, 0 when there is none.
	Issue int
	// Note says what the missing (or extra) versions carry.
	Note string
	// Since, for a key Kafka 3.9 does not have, is the Kafka release
	// whose range KafkaMin..KafkaMax is ("4.2"); "" for Kafka 3.9's keys.
	Since string
}

// Served reports whether Strata serves the key at all.
func (a Kafka39API) Served() bool { return a.StrataMax >= 0 }

// Status is the row's status as the docs give it.
func (a Kafka39API) Status() string {
	switch {
	case a.Since != "":
		if a.KafkaMin == a.KafkaMax {
			return fmt.Sprintf("Kafka %s: v%d", a.Since, a.KafkaMin)
		}
		return fmt.Sprintf("Kafka %s: v%d–v%d", a.Since, a.KafkaMin, a.KafkaMax)
	case !a.Served():
		return "not served"
	case a.StrataMin == a.KafkaMin && a.StrataMax == a.KafkaMax:
		return "full range"
	case a.StrataMin <= a.KafkaMin && a.StrataMax >= a.KafkaMax:
		return "wider"
	default:
		return "narrower"
	}
}

// Kafka39APIs is the conformance table, sorted by key.
var Kafka39APIs = []Kafka39API{
	{0, "Produce", 0, 11, 0, 12, 0, "v0–v2 message formats 0 and 1 are converted to record batch v2; v12 is Kafka 4.0's transaction version 2 (KIP-890 part 2: the leader adds the partition to the transaction)", ""},
	{1, "Fetch", 0, 17, 0, 17, 0, "v0–v3 are down-converted to message formats 0 and 1; v13+ topic IDs; v16 leader discovery (KIP-951)", ""},
	{2, "ListOffsets", 0, 9, 0, 9, 0, "v8 local log start (-4), v9 last tiered offset (-5, KIP-1005)", ""},
	{3, "Metadata", 0, 12, 0, 12, 0, "", ""},
	{8, "OffsetCommit", 0, 9, 0, 9, 0, "v9 commits of KIP-848 consumer groups (member epoch); v0 commits are kept in the log with the others (Kafka 3.9 keeps them in ZooKeeper)", ""},
	{9, "OffsetFetch", 0, 9, 0, 9, 0, "v9 checks the member epoch of KIP-848 consumer groups; v0 answers from the log as every version (Kafka 3.9 reads ZooKeeper)", ""},
	{10, "FindCoordinator", 0, 6, 0, 6, 0, "v6 share key type: the share coordinator of a share partition (KIP-932)", ""},
	{11, "JoinGroup", 0, 9, 0, 9, 0, "", ""},
	{12, "Heartbeat", 0, 4, 0, 4, 0, "", ""},
	{13, "LeaveGroup", 0, 5, 0, 5, 0, "", ""},
	{14, "SyncGroup", 0, 5, 0, 5, 0, "", ""},
	{15, "DescribeGroups", 0, 5, 0, 5, 0, "", ""},
	{16, "ListGroups", 0, 5, 0, 5, 0, "v5 TypesFilter and GroupType (classic, consumer)", ""},
	{17, "SaslHandshake", 0, 1, 0, 1, 0, "", ""},
	{18, "ApiVersions", 0, 4, 0, 4, 0, "", ""},
	{19, "CreateTopics", 0, 7, 0, 7, 0, "", ""},
	{20, "DeleteTopics", 0, 6, 0, 6, 0, "", ""},
	{21, "DeleteRecords", 0, 2, 0, 2, 0, "", ""},
	{22, "InitProducerId", 0, 5, 0, 5, 0, "", ""},
	{23, "OffsetForLeaderEpoch", 0, 4, 0, 4, 0, "", ""},
	{24, "AddPartitionsToTxn", 0, 5, 0, 5, 0, "", ""},
	{25, "AddOffsetsToTxn", 0, 4, 0, 4, 0, "", ""},
	{26, "EndTxn", 0, 4, 0, 5, 0, "v5 is Kafka 4.0's transaction version 2 (KIP-890 part 2: an epoch bump per transaction)", ""},
	{27, "WriteTxnMarkers", 0, 1, 0, 2, 0, "v2 is Kafka 4.0's, with the transaction version of each marker", ""},
	{28, "TxnOffsetCommit", 0, 4, 0, 5, 0, "v5 is Kafka 4.0's transaction version 2 (KIP-890 part 2: the offsets partition is added implicitly)", ""},
	{29, "DescribeAcls", 0, 3, 0, 3, 0, "", ""},
	{30, "CreateAcls", 0, 3, 0, 3, 0, "", ""},
	{31, "DeleteAcls", 0, 3, 0, 3, 0, "", ""},
	{32, "DescribeConfigs", 0, 4, 0, 4, 0, "", ""},
	{33, "AlterConfigs", 0, 2, 0, 2, 0, "", ""},
	{34, "AlterReplicaLogDirs", 0, 2, 0, 2, 0, "", ""},
	{35, "DescribeLogDirs", 0, 4, 0, 4, 0, "", ""},
	{36, "SaslAuthenticate", 0, 2, 0, 2, 0, "", ""},
	{37, "CreatePartitions", 0, 3, 0, 3, 0, "", ""},
	{38, "CreateDelegationToken", 0, 3, 0, 3, 0, "delegation tokens (KIP-48), v3 owner principal (KIP-373)", ""},
	{39, "RenewDelegationToken", 0, 2, 0, 2, 0, "", ""},
	{40, "ExpireDelegationToken", 0, 2, 0, 2, 0, "", ""},
	{41, "DescribeDelegationToken", 0, 3, 0, 3, 0, "", ""},
	{42, "DeleteGroups", 0, 2, 0, 2, 0, "", ""},
	{43, "ElectLeaders", 0, 2, 0, 2, 0, "", ""},
	{44, "IncrementalAlterConfigs", 0, 1, 0, 1, 0, "", ""},
	{45, "AlterPartitionReassignments", 0, 0, 0, 1, 0, "v1 is Kafka 4.0's (KIP-860, AllowReplicationFactorChange)", ""},
	{46, "ListPartitionReassignments", 0, 0, 0, 0, 0, "", ""},
	{47, "OffsetDelete", 0, 0, 0, 0, 0, "", ""},
	{48, "DescribeClientQuotas", 0, 1, 0, 1, 0, "user and client-id quotas (docs/quotas.md); no IP quotas", ""},
	{49, "AlterClientQuotas", 0, 1, 0, 1, 0, "producer_byte_rate, consumer_byte_rate, request_percentage; controller_mutation_rate and IP entities refused", ""},
	{50, "DescribeUserScramCredentials", 0, 0, 0, 0, 0, "", ""},
	{51, "AlterUserScramCredentials", 0, 0, 0, 0, 0, "", ""},
	{57, "UpdateFeatures", 0, 1, 0, 1, 0, "transaction.version 0–2 may be upgraded and downgraded (docs/transactions.md); every other feature is refused as a Kafka 3.9 ZooKeeper broker refuses it (INVALID_REQUEST)", ""},
	{60, "DescribeCluster", 0, 1, 0, 1, 0, "", ""},
	{61, "DescribeProducers", 0, 0, 0, 0, 0, "", ""},
	{65, "DescribeTransactions", 0, 0, 0, 0, 0, "", ""},
	{66, "ListTransactions", 0, 1, 0, 1, 0, "", ""},
	{68, "ConsumerGroupHeartbeat", 0, 0, 0, 1, 0, "KIP-848 consumer groups; v1 is Kafka 4.0's (regex subscriptions, client-made member ids); answers UNSUPPORTED_VERSION unless group.coordinator.rebalance.protocols lists consumer", ""},
	{69, "ConsumerGroupDescribe", 0, 0, 0, 1, 0, "KIP-848 consumer groups; v1 is Kafka 4.0's (member type)", ""},
	{76, "ShareGroupHeartbeat", 0, 1, 0, 1, 0, "share groups (KIP-932): membership with the simple assignor; kept in memory (docs/queues.md)", "4.2"},
	{77, "ShareGroupDescribe", 0, 1, 0, 1, 0, "share groups (KIP-932)", "4.2"},
	{78, "ShareFetch", 0, 2, 0, 2, 0, "share groups (KIP-932): acquisition locks, delivery counts, share sessions; v1 BatchSize and acquire mode, v2 RENEW (KIP-1222)", "4.2"},
	{79, "ShareAcknowledge", 0, 2, 0, 2, 0, "share groups (KIP-932): ACCEPT, RELEASE, REJECT, RENEW", "4.2"},
	{83, "InitializeShareGroupState", 0, 0, 0, 0, 0, "share coordinator (KIP-932), between brokers; CLUSTER_ACTION", "4.2"},
	{84, "ReadShareGroupState", 0, 0, 0, 0, 0, "share coordinator (KIP-932), between brokers; CLUSTER_ACTION", "4.2"},
	{85, "WriteShareGroupState", 0, 1, 0, 1, 0, "share coordinator (KIP-932), between brokers; CLUSTER_ACTION; v1 DeliveryCompleteCount", "4.2"},
	{86, "DeleteShareGroupState", 0, 0, 0, 0, 0, "share coordinator (KIP-932), between brokers; CLUSTER_ACTION", "4.2"},
	{87, "ReadShareGroupStateSummary", 0, 1, 0, 1, 0, "share coordinator (KIP-932), between brokers; CLUSTER_ACTION; v1 DeliveryCompleteCount", "4.2"},
	{90, "DescribeShareGroupOffsets", 0, 1, 0, 1, 0, "share groups' offsets admin (KIP-932); GROUP and TOPIC DESCRIBE; v1 Lag (KIP-1226)", "4.2"},
	{91, "AlterShareGroupOffsets", 0, 0, 0, 0, 0, "share groups' offsets admin (KIP-932): an empty group only; GROUP and TOPIC READ", "4.2"},
	{92, "DeleteShareGroupOffsets", 0, 0, 0, 0, 0, "share groups' offsets admin (KIP-932): an empty group only; GROUP DELETE, TOPIC READ", "4.2"},
}

// APITableCommand regenerates docs/compatibility.md's API table.
const APITableCommand = "go run ./cmd/strata docs apis --update docs/compatibility.md"

// The markers around the generated table in docs/compatibility.md.
const (
	APITableBegin = "<!-- BEGIN generated by `strata docs apis`: do not edit -->"
	APITableEnd   = "<!-- END generated by `strata docs apis` -->"
)

// WriteAPITable writes the conformance table as Markdown.
func WriteAPITable(w io.Writer) error {
	var b strings.Builder
	n := map[string]int{}
	var of39, later int
	for _, a := range Kafka39APIs {
		if a.Since != "" {
			later++
			continue
		}
		of39++
		n[a.Status()]++
	}
	fmt.Fprintf(&b, "Of the %d client API keys Kafka 3.9 serves in ZooKeeper mode, Strata serves %d at\n", of39, n["full range"])
	fmt.Fprintf(&b, "Kafka's full range, %d at a wider one, %d at a narrower one and %d not at all.\n", n["wider"], n["narrower"], n["not served"])
	fmt.Fprintf(&b, "The last %d rows are keys of later Kafka releases, their range that release's.\n", later)
	b.WriteString("ApiVersions advertises exactly the Strata column.\n\n")
	b.WriteString("| key | API | Kafka 3.9 | Strata | status | issue | what the difference is |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, a := range Kafka39APIs {
		strata := "—"
		if a.Served() {
			strata = versionRange(a.StrataMin, a.StrataMax)
		}
		issue := ""
		if a.Issue != 0 {
			issue = fmt.Sprintf("#%d", a.Issue)
		}
		kafka := versionRange(a.KafkaMin, a.KafkaMax)
		if a.Since != "" {
			kafka = "—"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", a.Key, a.Name, kafka, strata, a.Status(), issue, a.Note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func versionRange(lo, hi int16) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// ReplaceAPITable returns doc with the text between the API table markers
// replaced by table. The markers must each appear once, in order.
func ReplaceAPITable(doc, table string) (string, error) {
	i := strings.Index(doc, APITableBegin)
	j := strings.Index(doc, APITableEnd)
	if i < 0 || j < i || strings.Count(doc, APITableBegin) != 1 || strings.Count(doc, APITableEnd) != 1 {
		return "", fmt.Errorf("the API table markers (%q ... %q) must appear once each, in order", APITableBegin, APITableEnd)
	}
	return doc[:i+len(APITableBegin)] + "\n" + table + doc[j:], nil
}
