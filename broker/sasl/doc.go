// Package sasl is the server side of Kafka's SASL mechanisms: PLAIN (RFC
// 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and
// OAUTHBEARER (RFC 7628), each a per-connection state machine (Session)
// that takes the client's messages and answers, as Kafka's SaslServer
// implementations do. It knows nothing of connections: the broker carries
// the messages in SaslHandshake / SaslAuthenticate and decides what a
// failure does to the connection.
//
// A listener's setup is a Config, built from the listener's effective
// Kafka properties (sasl.enabled.mechanisms, <mechanism>.sasl.jaas.config,
// sasl.oauthbearer.*) and a CredentialStore for SCRAM (the coordinator's
// cache of /config/users). Per connection:
//
//	sess, err := cfg.NewSession(mechanism)   // SaslHandshake
//	for {                                    // SaslAuthenticate
//		out, done, err := sess.Step(authBytes)
//		...
//	}
//	sess.Principal()                         // "User:alice"
//	sess.Lifetime()                          // session_lifetime_ms, 0 = none
//
// The exchanges:
//
//	PLAIN         C: [authzid] NUL authcid NUL passwd
//	              S: (empty)                                  done
//
//	SCRAM-SHA-*   C: n,[a=authzid],n=user,r=cnonce[,ext=val]
//	              S: r=cnonce+snonce,s=base64(salt),i=iterations
//	              C: c=base64(gs2 header),r=cnonce+snonce,p=base64(proof)
//	              S: v=base64(server signature)               done
//	              (or e=invalid-proof ... with an error)
//
//	OAUTHBEARER   C: n,[a=authzid],^Aauth=Bearer <jwt>^A[key=value^A]^A
//	              S: (empty)                                  done
//	              or S: {"status":"invalid_token"}  C: ^A  -> error
//
// SCRAM credentials are stored as Kafka stores them in ZooKeeper
// (FormatScramCredential): "salt=<b64>,stored_key=<b64>,server_key=<b64>,
// iterations=<n>" with StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"). An unknown user gets a
// salt derived from its name with a per-process key and fails at the proof,
// exactly as a wrong password does. No password, salted password or key is
// ever in an error, a log line or a String.
package sasl
