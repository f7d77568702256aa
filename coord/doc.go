// Package coord owns cluster metadata and coordination: the cluster ID, the
// broker registry, controller election, and the topics with their IDs,
// replica assignments, partition leader state and per-topic config
// overrides. It knows nothing of logs.
//
// # Two interfaces
//
// Coordinator is what a broker of a cluster needs: a session with the
// coordination service, a watch-fed cache of the whole cluster state
// (Snapshot, Subscribe), broker registration, controller election
// (Campaign, Leadership) and compare-and-set writes of partition state.
// Two implementations pass one contract test suite (contract_test.go):
//
//   - ZK (DialZK): ZooKeeper through github.com/go-zookeeper/zk, under the
//     chroot of zookeeper.connect (default /strata, created if missing).
//   - LocalStore / LocalSession (OpenLocal, Connect): the embedded
//     single-node coordinator of strata broker without zookeeper.connect.
//     Persistent state in MetadataFile in the data directory, replaced
//     atomically (temp file, fsync, rename, fsync dir); ephemeral state
//     in memory, per session, with the same semantics as ZooKeeper.
//
// Open picks one from a Config. Local reads the file the single-node
// broker wrote before clustering (format 1) and rewrites it in format 2.
//
// # How a broker uses a Coordinator
//
//	c, err := coord.Open(ctx, coord.Config{ZooKeeperConnect: zkConnect, DataDir: logDir,
//		SessionTimeout: zkSessionTimeout, Logger: log})
//	epoch, err := c.Register(ctx, coord.BrokerInfo{ID: id, Host: advHost, Port: advPort,
//		ReplicationPort: grpcPort, Rack: rack})  // ErrBrokerIDInUse: refuse to start
//	snap, sub := c.Subscribe()                  // the metadata cache: apply snap, then events
//	go coord.RunController(ctx, c, coord.DefaultControllerConfig(id))
//	...
//	// Metadata requests: c.Snapshot() — Brokers, Controller, Topics (Replicas,
//	// State.Leader, State.LeaderEpoch, State.ISR), OfflineReplicas.
//	// Produce/Fetch/ListOffsets: NOT_LEADER_OR_FOLLOWER unless
//	// snapshot.Partition(tp).State.Leader == id.
//	// CreateTopics: asg := coord.AssignReplicas(snap.Brokers, n, rf, coord.RandomStart);
//	// c.CreateTopic(ctx, coord.TopicSpec{Name, Assignment: asg, Configs}).
//	// CreatePartitions: AssignReplicas with AddStartIndex and StartPartition,
//	// then c.AddPartitions(ctx, name, first, asg).
//	// ElectLeaders: c.ElectPreferredLeaders(ctx, partitions).
//	// ISR changes by a partition leader: c.PartitionState, then
//	// c.UpdatePartitionState(..., version) (ErrVersionConflict: re-read).
//	...
//	// A log directory failed: c.ReportOfflineReplicas(ctx, id, its partitions).
//	// SIGTERM: remaining, err := c.ControlledShutdown(ctx, id) (bounded ctx;
//	// remaining are partitions nobody else could take), stop serving,
//	// cancel RunController's ctx (it resigns), c.Deregister, c.Close.
//
// Events tell the broker what changed (EventTopic: open logs and start
// replicas; EventPartition: become leader or follower at the new epoch;
// EventTopicDeleted: delete the logs of that topic ID; EventDisconnected:
// log the outage once, keep serving from the snapshot; EventSessionExpired:
// re-registered with a new broker epoch; EventRegistrationLost: stop). A
// broker starting up should also delete local partitions whose topic ID
// is not in Snapshot().Topics (deleted while it was down).
//
// # ZooKeeper layout
//
// Under the chroot; every value is JSON with "version": 1 (a reader
// refuses versions it does not know). Field names are stored data: never
// rename them.
//
//	cluster/id                              persistent, created once
//	    {"version":1,"id":"<22 chars, URL-safe base64 of 16 random bytes>"}
//	brokers/ids/<id>                        ephemeral, one per live broker;
//	                                        broker epoch = the znode's czxid
//	    {"version":1,"host":"10.0.0.5","port":9092,"replication_port":9093,
//	     "rack":"r1","timestamp":"2026-01-02T03:04:05.6Z"}
//	controller                              ephemeral, the elected controller
//	    {"version":1,"broker_id":2,"epoch":7,"timestamp":"..."}
//	controller_epoch                        persistent; its znode version fences
//	    {"version":1,"epoch":7}
//	topics/<name>                           persistent: ID, assignment, configs,
//	                                        reassignments in progress (Kafka's
//	                                        fields, only while there are some)
//	    {"version":1,"id":"<UUID>","partitions":{"0":[1,2,3],"1":[2,3,1]},
//	     "configs":{"retention.ms":"3600000"},
//	     "adding_replicas":{"1":[4]},"removing_replicas":{"1":[1]}}
//	topics/<name>/partitions/<n>            persistent, empty
//	topics/<name>/partitions/<n>/state      persistent, written only with
//	                                        compare-and-set on its version
//	    {"version":1,"leader":1,"leader_epoch":4,"isr":[1,2,3],"controller_epoch":7}
//	admin/delete_topics/<name>              persistent pending-deletion marker
//	    {"version":1,"topic_id":"<UUID>"}
//	admin/controller_requests/req-<seq>     ephemeral sequential, owned by the
//	                                        requester; the controller writes
//	                                        "answer" into it
//	    {"version":1,"kind":"controlled_shutdown","broker_id":3,
//	     "answer":{"controller_epoch":7,"remaining":[{"topic":"t","partition":0}]}}
//	    {"version":1,"kind":"offline_replicas","broker_id":3,
//	     "partitions":[{"topic":"t","partition":0}],
//	     "answer":{"controller_epoch":7,"remaining":[]}}
//	    {"version":1,"kind":"preferred_election","broker_id":0,
//	     "partitions":[{"topic":"t","partition":0}],
//	     "answer":{"controller_epoch":7,"remaining":[],
//	               "results":[{"topic":"t","partition":0,"error":"election_not_needed"}]}}
//	config/users/<URL-encoded user>         persistent, Kafka's own layout (users.go):
//	                                        SCRAM credentials and any other user config
//	    {"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}
//	config/changes/config_change_<seq>      persistent sequential, Kafka's change notification
//	    {"version":2,"entity_path":"users/<URL-encoded user>"}
//
// ACLs use Kafka's own layout and formats (kafka.zk.ZkAclStore,
// ZkAclChangeStore), so a Kafka tool reading the chroot finds them where
// Kafka keeps them. The JSON has Kafka's field names and PascalCase
// values; see package acl:
//
//	kafka-acl/<ResourceType>/<name>         persistent, LITERAL patterns
//	                                        (ResourceType: Topic, Group,
//	                                        Cluster, TransactionalId,
//	                                        DelegationToken, User)
//	    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
//	                          "operation":"Read","host":"*"}]}
//	kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns, same JSON
//	kafka-acl-changes/acl_changes_<seq>     persistent sequential: "TOPIC:name"
//	kafka-acl-extended-changes/acl_changes_<seq>
//	    {"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}
//
// A pattern's znode is written with compare-and-set on its version, in
// one transaction with its change notification (create, set, or delete
// when no entry is left); a conflict re-reads and retries. Every broker
// watches both change directories and re-reads the patterns they name;
// notifications older than 15 minutes are deleted, as Kafka does. The
// embedded store keeps ACLs in ACLFile beside MetadataFile.
//
// Atomic steps (ZooKeeper multi-op transactions):
//   - A user's SCRAM credentials: create / set (at the version read) /
//     delete config/users/<user> + create the change notification. Every
//     broker watches config/changes and re-reads config/users.
//   - Election: create controller (ephemeral) + set controller_epoch to
//     epoch+1 at the version read. A taken controller znode: wait for it
//     to go.
//   - Every controller write (partition states, request answers,
//     finishing a deletion, resigning): check controller_epoch's version is
//     the one the election produced + the write. A later election changed
//     it, so a deposed controller's write fails (ErrNotController) and it
//     steps down.
//   - Topic creation: create and delete admin/delete_topics/<name> (so a
//     pending deletion blocks it) + create topics/<name>, partitions, each
//     partition and its state.
//   - Adding partitions: set topics/<name> at its version + create the new
//     partitions and states.
//   - Deletion: create the marker; delete states, partitions, the topic
//     (batches of 256); delete the marker. A crash in between leaves the
//     marker: the topic is out of Snapshot().Topics (listed in
//     PendingDeletion) and the next active controller finishes the job.
//     The embedded store drops the topic and writes the marker in one file
//     write, and removes the marker in a second.
//
// # Sessions and outages
//
// ZooKeeper unreachable: Snapshot keeps the last state with Connected
// false; calls fail at once with ErrUnavailable (an in-flight call ends
// within two thirds of the session timeout). Back with the same session:
// EventReconnected, the cache re-reads everything. Back after the session
// expired: a new session is opened, the broker registered again (new
// epoch), any Leadership ended (RunController campaigns again), the cache
// reloaded, EventSessionExpired. A broker restarted right after kill -9
// finds its old registration: Register waits up to the session timeout
// plus 2s for it to expire before refusing with ErrBrokerIDInUse.
//
// # The controller
//
// RunController campaigns; when elected it reacts to every change (and
// retries failed writes after RetryBackoff) with these rules
// (PlanPartition, PlanPreferred, in election.go, pure and table-tested):
//
//   - Leader not live or shutting down: new leader = first replica in
//     assignment order that is live, not shutting down and in the ISR;
//     ISR = its live, not-shutting-down members; leader epoch + 1.
//   - No such replica: a shutting-down leader keeps leading (reported as
//     remaining); else a live shutting-down ISR member leads; else with
//     unclean.leader.election.enable=true (topic config, or the broker
//     default) the first live replica leads with ISR = [itself]; else the
//     partition goes offline: leader -1, epoch + 1, ISR cut to live
//     members or, if none is live, kept so the last in-sync replicas can
//     lead when they return.
//   - Leader fine: dead or shutting-down followers leave the ISR (no epoch
//     change); with auto.leader.rebalance.enable (default true) an
//     eligible preferred replica (first in the assignment) that is in the
//     ISR takes leadership back (epoch + 1).
//   - Controlled shutdown: the request marks the broker as shutting down
//     for as long as its session lives; the rules above move its
//     leadership and take it out of every ISR; the answer lists what it
//     still leads.
//   - Offline replicas (a broker's log directory failed, KIP-112): the
//     report lives as long as the broker's session; for each partition
//     it names, that broker counts as not live, so the rules above move
//     its leadership to another in-sync replica (or take the partition
//     offline) and take it out of the ISR. Its other replicas are
//     untouched. The answer lists what it still leads (nothing, unless a
//     write failed).
//   - Preferred election on demand: per partition, elected, or
//     ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
//     ErrUnknownTopic, ErrUnknownPartition.
//   - Pending topic deletions are finished.
//   - Reassignments (reassignment.go; AlterPartitionReassignments writes
//     them into topics/<name> with compare-and-set): once every target
//     replica is in the ISR, one fenced transaction moves leadership into
//     the target if needed (epoch + 1), cuts the ISR to the target, sets
//     the replicas to the target and clears adding/removing. A leader or
//     ISR member that is no longer a replica (a cancel) is treated like a
//     lost one by the rules above.
//
// Every state write is compare-and-set on the state's version and fenced
// by the controller epoch. Per broker loss the controller logs, and
// reports through ControllerConfig.OnFailover, the time from seeing the
// registration disappear to the last new state written.
//
// Replica assignment (AssignReplicas) is Kafka's: round-robin leaders
// from a (random or given) start index so leaders spread evenly, followers
// at a shift growing every n partitions, and with racks on every broker a
// rack-alternating broker order so a partition's replicas span distinct
// racks as far as possible.
//
// # Embedded file
//
// Local keeps MetadataFile in format 2 (it reads format 1, the
// single-node broker's before clustering):
//
//	{
//	  "version": 2,
//	  "cluster_id": "<22 chars>",
//	  "controller_epoch": 3,
//	  "broker_epoch": 12,
//	  "topics": {
//	    "<name>": {
//	      "id": "<UUID, 8-4-4-4-12 hex>",
//	      "partitions": [{"replicas": [0], "isr": [0], "leader": 0, "leader_epoch": 0,
//	                      "controller_epoch": 3, "version": 5,
//	                      "adding_replicas": [], "removing_replicas": []}],
//	      "configs": {"retention.ms": "3600000"}
//	    }
//	  },
//	  "pending_deletion": {"<name>": "<UUID>"}
//	}
//
// Format 1 has no controller_epoch, broker_epoch, per-partition
// controller_epoch and version, nor pending_deletion; they read as zero.
// adding_replicas and removing_replicas are omitted when empty.
package coord
