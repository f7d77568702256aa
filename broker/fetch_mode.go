//go:build !strata_copyfetch

package broker

// copyFetchBuild is set by the strata_copyfetch build tag, which makes
// copying fetched records through user space the default (the "build that
// copies" of the CPU benchmark). strata.fetch.zero.copy overrides it.
const copyFetchBuild = false
