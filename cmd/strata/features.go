package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(&command{
		name:    "features",
		summary: "describe, upgrade, downgrade the cluster's finalized features",
		actions: featureActions,
		help:    featuresHelp,
	})
}

var featureActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"describe":  featureAction("describe"),
	"upgrade":   featureAction("upgrade"),
	"downgrade": featureAction("downgrade"),
}

func featureAction(action string) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int { return runFeatures(action, args, stdout, stderr) }
}

const featuresHelp = `Usage: strata features <action> [flags]

Shows and changes the cluster's finalized features (KIP-584) through
ApiVersions and UpdateFeatures, like kafka-features.sh. The feature the
brokers support is transaction.version (0-2; 2 is Kafka 4.x's transaction
protocol, KIP-890 part 2; docs/transactions.md). Changing it needs ALTER on
the cluster.

Actions:
  describe   print each supported feature's range and finalized level
  upgrade    raise features to the levels given
  downgrade  lower features to the levels given (--unsafe for a lossy one)

Example:
  strata features describe
  strata features upgrade --feature transaction.version=2
  strata features downgrade --feature transaction.version=1 --dry-run
`

func runFeatures(action string, args []string, stdout, stderr io.Writer) int {
	usage := map[string]string{
		"describe":  "Usage: strata features describe [flags]\n\nPrints the features the broker supports, with their finalized levels and epoch.\n",
		"upgrade":   "Usage: strata features upgrade --feature NAME=LEVEL... [flags]\n\nRaises each feature to its level (UpdateFeatures, upgrade type UPGRADE).\n",
		"downgrade": "Usage: strata features downgrade --feature NAME=LEVEL... [flags]\n\nLowers each feature to its level (UpdateFeatures, SAFE_DOWNGRADE; --unsafe:\nUNSAFE_DOWNGRADE). Level 0 removes the feature.\n",
	}[action]
	c := newClientCmd("features "+action, usage, "\nExample:\n  strata features "+action+exampleArgs(action)+"\n", stdout, stderr)
	var features stringsFlag
	var dryRun, unsafe *bool
	if action != "describe" {
		c.fs.Var(&features, "feature", "a `NAME=LEVEL` to set (repeatable)")
		dryRun = c.fs.Bool("dry-run", false, "validate the update without applying it")
	}
	if action == "downgrade" {
		unsafe = c.fs.Bool("unsafe", false, "an unsafe (lossy) downgrade")
	}
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	if action == "describe" {
		return c.withAdmin(func(ctx context.Context, s *session) int { return describeFeatures(c.stdout, s.versions) })
	}
	if len(features) == 0 {
		return c.usageError("--feature is required")
	}
	var updates []kadm.FeatureUpdate
	for _, f := range features {
		name, lv, ok := strings.Cut(f, "=")
		level, err := strconv.ParseInt(lv, 10, 16)
		if !ok || name == "" || err != nil {
			return c.usageError("--feature %q: want NAME=LEVEL", f)
		}
		u := kadm.FeatureUpdate{Feature: name, MaxVersionLevel: int16(level), UpgradeType: 1}
		if action == "downgrade" {
			u.UpgradeType = 2
			if *unsafe {
				u.UpgradeType = 3
			}
		}
		updates = append(updates, u)
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		res, err := s.adm.UpdateFeatures(ctx, *dryRun, updates...)
		if err != nil {
			return c.fail(err)
		}
		status := 0
		verb := action + "d"
		for _, u := range updates {
			if r, ok := res[u.Feature]; ok && r.Err != nil {
				fmt.Fprintf(c.stderr, "%s could not be %s to %d: %v\n", u.Feature, verb, u.MaxVersionLevel, r.Err)
				status = 1
				continue
			}
			if *dryRun {
				fmt.Fprintf(c.stdout, "%s can be %s to %d.\n", u.Feature, verb, u.MaxVersionLevel)
			} else {
				fmt.Fprintf(c.stdout, "%s was %s to %d.\n", u.Feature, verb, u.MaxVersionLevel)
			}
		}
		return status
	})
}

func exampleArgs(action string) string {
	switch action {
	case "upgrade":
		return " --feature transaction.version=2"
	case "downgrade":
		return " --feature transaction.version=1"
	}
	return ""
}

// describeFeatures prints the features of an ApiVersions response as
// kafka-features.sh describe does.
func describeFeatures(w io.Writer, v *kmsg.ApiVersionsResponse) int {
	finalized := map[string]int16{}
	for _, f := range v.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, f := range v.SupportedFeatures {
		fmt.Fprintf(tw, "Feature: %s\tSupportedMinVersion: %d\tSupportedMaxVersion: %d\tFinalizedVersionLevel: %d\tEpoch: %d\n",
			f.Name, f.MinVersion, f.MaxVersion, finalized[f.Name], v.FinalizedFeaturesEpoch)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}
