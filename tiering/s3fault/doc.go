// Package s3fault is a fault-injecting HTTP proxy for tests: it sits
// between an S3 client (the broker's aws-sdk-go-v2 store, a strata
// process) and a real S3 store (MinIO from tiering/miniotest) and, for
// the requests its rules pick, answers or breaks them the way object
// stores fail:
//
//	client ──► 127.0.0.1:<port> (Proxy) ──► MinIO
//	              │ Classify: method + path + query → Op
//	              │ rules, in order: Ops, Key, RangedOnly, Fraction (seeded), Limit
//	              ▼
//	  SlowDown       503 <Error><Code>SlowDown</Code>…  Retry-After, x-amz-retry-after
//	  InternalError  500 <Error><Code>InternalError</Code>…
//	  Delay          forwarded after a wait
//	  Throttle       forwarded, bodies at a shared byte rate
//	  Reset          RST after N bytes of the upload (never forwarded) or of the answer
//	  DropResponse   forwarded and carried out; the client's connection reset
//	  Truncate       answer cut after N bytes, headers unchanged (short of Content-Length)
//	  ShortBody      answer cut after N bytes, Content-Length and Content-Range rewritten
//	  Refuse         connection reset unread: the store is down
//
// Operations are told apart as S3 tells them: PUT with ?partNumber and
// ?uploadId is a part upload, POST ?uploads starts a multipart upload,
// POST ?uploadId completes one, DELETE ?uploadId aborts it, GET of the
// bucket (?list-type=2) lists, and so on (Classify). Only path-style
// addressing is understood, which is what a client pointed at an
// endpoint uses.
//
// Rules are switched at run time (Set, Clear), so one test can take a
// store through several faults and back to health. The proxy counts the
// requests it received per operation and the faults it injected per
// operation and fault (Counts), so a test can check that a fault did
// reach the client rather than pass unnoticed. A rule's Fraction is drawn
// from a generator seeded at Start: the same seed and the same order of
// requests give the same picks.
//
// The proxy forwards the client's request target and Host header
// unchanged, so SigV4 signatures made for the proxy's address verify at
// the store.
package s3fault
