package broker

import "syscall"

// diskSpace returns the total and usable bytes of the file system holding
// path (statfs: blocks and blocks available to unprivileged users, as
// Java's FileStore.getTotalSpace and getUsableSpace), or -1, -1 if it
// cannot be read.
func diskSpace(path string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1, -1
	}
	bs := st.Frsize
	if bs <= 0 {
		bs = st.Bsize
	}
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs
}
