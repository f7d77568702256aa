package broker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	in := `# a comment
! another comment
broker.id=1
listeners = PLAINTEXT://127.0.0.1:9092
log.dirs: /tmp/data
num.partitions 3
long.value = first,\
    second,\
    third
escaped\ key=a\tb\u0041
empty=
  indented.key=x
dup=1
dup=2
`
	got, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"broker.id":      "1",
		"listeners":      "PLAINTEXT://127.0.0.1:9092",
		"log.dirs":       "/tmp/data",
		"num.partitions": "3",
		"long.value":     "first,second,third",
		"escaped key":    "a\tbA",
		"empty":          "",
		"indented.key":   "x",
		"dup":            "2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if _, err := ParseProperties(strings.NewReader("bad=\\u00zz\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad escape: got %v, want an error naming line 1", err)
	}
}

// TestReadPropertiesFile checks the file reader: a missing file is
// fs.ErrNotExist, a syntax error names the file and line, and the files of
// the data directory (meta.properties as Kafka and Strata write it,
// partition.metadata with "key: value" lines) read as before.
func TestReadPropertiesFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadPropertiesFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: got %v, want fs.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.properties")
	if err := os.WriteFile(bad, []byte("a=1\nb=\\u12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPropertiesFile(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad escape: got %v, want an error naming %s and line 2", err, bad)
	}
	for i, tc := range []struct {
		text string
		want map[string]string
	}{
		{"#Written by strata broker; do not edit\nversion=0\nbroker.id=1\ncluster.id=AbC-d_EfGhIjKlMnOpQrSt\n",
			map[string]string{"version": "0", "broker.id": "1", "cluster.id": "AbC-d_EfGhIjKlMnOpQrSt"}},
		{"#\n#Tue Jan 02 15:04:05 UTC 2024\ncluster.id=x\\:y\nversion=0\nbroker.id=2\n",
			map[string]string{"cluster.id": "x:y", "version": "0", "broker.id": "2"}},
		{"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n",
			map[string]string{"version": "0", "topic_id": "AAECAwQFBgcICQoLDA0ODw"}},
	} {
		path := filepath.Join(dir, "p.properties")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readProperties(path)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("#%d: got %q, %v; want %q", i, got, err, tc.want)
		}
	}
}
