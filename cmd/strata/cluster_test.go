package main

import (
	"regexp"
	"testing"
)

func TestCluster(t *testing.T) {
	s, addr := startBroker(t)
	r := mustCLI(t, "cluster", "--bootstrap-server", addr)
	want := "^Cluster ID: " + regexp.QuoteMeta(s.ClusterID()) + "\nController: 0\nBrokers: 1\nID +ADDRESS +RACK\n0 +" + regexp.QuoteMeta(addr) + " +-\n$"
	if !regexp.MustCompile(want).MatchString(r.stdout) {
		t.Errorf("got:\n%s\nwant to match:\n%s", r.stdout, want)
	}
}
