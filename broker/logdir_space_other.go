//go:build !linux

package broker

// diskSpace is unknown off Linux: -1, -1 (DescribeLogDirs v4's "unknown").
func diskSpace(path string) (total, usable int64) { return -1, -1 }
