package coord

import (
	"errors"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
)

// testScramCredentials: one user's credentials set, replaced and deleted
// atomically, seen at once by the writer and soon by another session,
// kept across a restart; the user's name may hold any character.
func testScramCredentials(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ctx := ctxT(t, waitTimeout)
	const user = "alice b/c*é=,%"
	cred256, cred512 := "salt=AAAA,stored_key=BBBB,server_key=CCCC,iterations=4096", "salt=DDDD,stored_key=EEEE,server_key=FFFF,iterations=8192"

	if err := a.AlterScramCredentials(ctx, user, ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": cred256}}); err != nil {
		t.Fatal(err)
	}
	if c, ok := a.ScramCredential(user, "SCRAM-SHA-256"); !ok || c != cred256 {
		t.Fatalf("writer's read: got %q %v, want %q", c, ok, cred256)
	}
	waitCred(t, b, user, "SCRAM-SHA-256", cred256)

	// Upsert and delete in one alteration.
	if err := b.AlterScramCredentials(ctx, user, ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-512": cred512}, Delete: []string{"SCRAM-SHA-256"}}); err != nil {
		t.Fatal(err)
	}
	waitCred(t, a, user, "SCRAM-SHA-512", cred512)
	waitCred(t, a, user, "SCRAM-SHA-256", "")
	if got := b.ScramUsers(); len(got) != 1 || len(got[user]) != 1 || got[user]["SCRAM-SHA-512"] != cred512 {
		t.Fatalf("ScramUsers: got %v", got)
	}

	// Refused alterations change nothing.
	for i, tc := range []struct {
		user string
		alt  ScramAlteration
	}{
		{user, ScramAlteration{Delete: []string{"SCRAM-SHA-256"}}}, // not there
		{user, ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": cred256}, Delete: []string{"SCRAM-SHA-512", "SCRAM-SHA-256"}}},
		{"", ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": cred256}}},
		{user, ScramAlteration{Upsert: map[string]string{"PLAIN": "x"}}},
		{user, ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": ""}}},
	} {
		if err := a.AlterScramCredentials(ctx, tc.user, tc.alt); err == nil {
			t.Fatalf("#%d: accepted %+v", i, tc.alt)
		}
	}
	if err := a.AlterScramCredentials(ctx, user, ScramAlteration{Delete: []string{"SCRAM-SHA-256"}}); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("delete of a missing credential: got %v, want ErrUnknownCredential", err)
	}
	if c, ok := a.ScramCredential(user, "SCRAM-SHA-512"); !ok || c != cred512 {
		t.Fatalf("after refused alterations: got %q %v", c, ok)
	}

	// Kept across a restart of every session.
	if err := a.AlterScramCredentials(ctx, "bob", ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": cred256}}); err != nil {
		t.Fatal(err)
	}
	e.restart(t)
	c := e.open(t)
	if got := c.ScramUsers(); len(got) != 2 || got[user]["SCRAM-SHA-512"] != cred512 || got["bob"]["SCRAM-SHA-256"] != cred256 {
		t.Fatalf("after restart: got %v", got)
	}

	// The last credential's deletion removes the user.
	d := e.open(t)
	if err := c.AlterScramCredentials(ctx, user, ScramAlteration{Delete: []string{"SCRAM-SHA-512"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.ScramUsers()[user]; ok {
		t.Fatal("user without credentials still listed")
	}
	if !poll.For(waitTimeout, func() bool { _, ok := d.ScramUsers()[user]; return !ok }) {
		t.Fatal("other session still lists the deleted user")
	}
}

// waitCred polls c until user's credential for mech is want ("" for
// none) and logs how long it took.
func waitCred(t *testing.T, c Coordinator, user, mech, want string) {
	t.Helper()
	start := time.Now()
	ok := poll.For(waitTimeout, func() bool {
		got, ok := c.ScramCredential(user, mech)
		return (want == "" && !ok) || (ok && got == want)
	})
	if !ok {
		t.Fatalf("credential %s of %q not seen by another session in %v", mech, user, waitTimeout)
	}
	t.Logf("credential change seen by another session after %v", time.Since(start))
}
