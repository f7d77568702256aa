package main

// Flag parsing shared by every subcommand: flags and arguments mixed, Kafka's
// double dashes in messages, and the nearest valid name for a mistyped
// flag, command or action, by edit distance.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// parseMixed parses args with fs, flags and arguments in any order (Go's
// flag package stops at the first argument); after "--" everything is an
// argument. It returns the arguments in order. fs's own error output
// should be off (io.Discard): report errors with flagErrorText.
func parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

const undefinedFlag = "flag provided but not defined: -"

// flagErrorText is err, from parsing fs, as the user should read it: an
// undefined flag named with the nearest defined one, flags spelled with
// Kafka's double dashes.
func flagErrorText(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, undefinedFlag); ok {
		return fmt.Sprintf("unknown flag --%s%s", name, didYouMean(name, flagNames(fs), "--"))
	}
	for _, s := range []string{"for flag -", "flag needs an argument: -"} {
		msg = strings.Replace(msg, s, s+"-", 1)
	}
	return msg
}

// reportFlagError prints err from parsing fs as "strata NAME: message",
// unless it is flag.ErrHelp, and reports whether it printed.
func reportFlagError(w io.Writer, name string, fs *flag.FlagSet, err error) bool {
	if errors.Is(err, flag.ErrHelp) {
		return false
	}
	fmt.Fprintf(w, "strata %s: %s\n", name, flagErrorText(fs, err))
	return true
}

// flagNames returns the names of fs's flags, sorted.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// didYouMean returns ": did you mean PREFIX+X?" for the candidate X nearest
// to name, or "" when none is near enough to be what was meant.
func didYouMean(name string, candidates []string, prefix string) string {
	if best, ok := nearest(name, candidates); ok {
		return fmt.Sprintf(": did you mean %s%s?", prefix, best)
	}
	return ""
}

// nearest returns the candidate nearest to name: the one at the smallest
// edit distance (ties to the first in sorted order) if that distance is
// small for name's length, else the only candidate name is a prefix of
// (three letters or more).
func nearest(name string, candidates []string) (string, bool) {
	sorted := slices.Sorted(slices.Values(candidates))
	best, bestD := "", -1
	for _, c := range sorted {
		if d := editDistance(name, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD >= 0 && bestD <= maxTypos(name) {
		return best, true
	}
	if len(name) >= 3 {
		var with []string
		for _, c := range sorted {
			if strings.HasPrefix(c, name) {
				with = append(with, c)
			}
		}
		if len(with) == 1 {
			return with[0], true
		}
	}
	return "", false
}

// maxTypos is how many edits a mistyped name of this length may carry and
// still be taken for a candidate: one up to 5 letters, then one more every
// 4 letters, at most 3.
func maxTypos(name string) int {
	n := len([]rune(name))
	switch {
	case n <= 1:
		return 0
	case n <= 5:
		return 1
	}
	return min(3, 1+(n-2)/4)
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest insertions, deletions, substitutions and transpositions of
// adjacent letters that turn a into b ("topci" is one from "topic").
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// d[i][j] is the distance between s[:i] and t[:j]; three rows kept.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
