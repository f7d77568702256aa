package producer

import "github.com/stratastream/strata/segment/atomicfile"

// files replaces the package's files (snapshots, the id block file)
// atomically and fsyncs their directories. Tests give it a faulty FS.
var files atomicfile.Writer
