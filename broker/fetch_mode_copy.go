//go:build strata_copyfetch

package broker

// copyFetchBuild: this build copies fetched records through user space by
// default. See fetch_mode.go.
const copyFetchBuild = true
