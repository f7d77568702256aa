// Package atomicfile replaces the contents of a file so that a crash leaves
// either the old contents or the new ones, never a mix, and a returned
// success means the new contents are durable. It is the one implementation
// of that procedure in Strata: segment's checkpoints, the producer state's
// snapshots and id block file, the embedded coordinator's metadata file,
// the broker's meta.properties and partition.metadata, and the objects of
// the local-directory object store all go through it.
//
// # The procedure
//
//  1. create a temporary file in the target's directory (the same file
//     system, so that the rename below is atomic)
//  2. write the new contents to it
//  3. fsync it and close it
//  4. rename it over the target
//  5. fsync the directory, so that the rename itself is durable
//
// Every error, from fsync and close included, is returned; nothing is
// retried, since a failed fsync may have dropped the data it was to write.
// On any failure before the rename the temporary file is removed and the
// target is untouched. A failure of step 5 leaves the new contents in place
// but not known to be durable: the caller must treat it as a failed write.
//
// # Temporary file names
//
// WriteFile names its temporary file after the target: path + TempSuffix,
// truncated if it exists. So there is at most one leftover per target after
// a crash, and the directory's owner can find and remove leftovers by their
// suffix (segment recovery removes *.tmp from a partition directory). The
// price is that two writers must not replace the same path at the same
// time; every caller of WriteFile writes its file from one goroutine at a
// time. Writers that do replace one path concurrently (the local object
// store) use CreateTemp, which picks a unique name from a pattern.
//
// # Fault injection
//
// The steps go through an FS. OS is the real file system; a Writer with
// another FS (typically one embedding OS and overriding a method) lets a
// test make an fsync, a write or a rename fail.
//
// # Why this package lives under segment/
//
// The top-level folders are fixed, and every package that writes files
// needs this one, coord included, whose only allowed imports are the
// standard library and go-zookeeper. The rule for coord exists to keep the
// knowledge of logs out of it. This package holds no such knowledge: it
// imports only the standard library and knows nothing of segments, logs,
// brokers or partitions, so it is a leaf below every package, like os
// itself. It sits under segment/ because segment is the lowest room and the
// one that writes most files; segment imports it, never the reverse.
package atomicfile
