// Package acl is Kafka's authorization model: resource patterns, access
// control entries and the bindings of the two (ACLs), the filters that
// DescribeAcls and DeleteAcls match them with, the validation CreateAcls
// applies, and an Authorizer that answers "may this principal, from this
// host, do this operation on this resource" the way Kafka's AclAuthorizer
// (ZooKeeper mode) and StandardAuthorizer (KRaft) do.
//
// # Wire codes
//
// The enums carry Kafka's wire codes (they travel in the ACL APIs and in
// the authorized-operations bit fields): never renumber them.
//
//	ResourceType   UNKNOWN 0, ANY 1, TOPIC 2, GROUP 3, CLUSTER 4,
//	               TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6, USER 7
//	PatternType    UNKNOWN 0, ANY 1, MATCH 2, LITERAL 3, PREFIXED 4
//	Operation      UNKNOWN 0, ANY 1, ALL 2, READ 3, WRITE 4, CREATE 5,
//	               DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
//	               DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
//	               IDEMPOTENT_WRITE 12, CREATE_TOKENS 13, DESCRIBE_TOKENS 14
//	PermissionType UNKNOWN 0, ANY 1, DENY 2, ALLOW 3
//
// ANY (and MATCH) exist only in filters; UNKNOWN is what an unknown code
// or name decodes to, and is refused everywhere.
//
// # Authorization semantics
//
// Authorize(principal, host, op, resource) allows when any of:
//   - the principal is one of super.users;
//   - no ACL at all applies to the resource (a LITERAL binding of its
//     name, the LITERAL wildcard "*", or a PREFIXED binding whose name is
//     a prefix of the resource's) and allow.everyone.if.no.acl.found is
//     true;
//   - no DENY applies and an ALLOW applies. An entry applies when its
//     principal is the principal or "User:*", its host the host or "*",
//     and its operation the operation or ALL. READ, WRITE, DELETE and
//     ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS (for
//     ALLOW only: a DENY of READ does not deny DESCRIBE).
//
// AuthorizeByResourceType is KIP-679's "is the principal allowed op on at
// least one resource of this type", as AclAuthorizer computes it.
//
// # Stored form
//
// EncodeEntries and DecodeEntries read and write the JSON that Kafka keeps
// in ZooKeeper for one resource pattern (kafka.zk.ResourceZNode):
//
//	{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
//	                      "operation":"Read","host":"*"}]}
//
// Names are Kafka's PascalCase ("Topic", "TransactionalId",
// "DescribeConfigs", "Allow"). Decoding also accepts, case-insensitively,
// the upper-case forms Kafka's SecurityUtils accepts ("TRANSACTIONALID")
// and Java's enum names ("TRANSACTIONAL_ID").
package acl
