package broker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratastream/strata/broker/share"
)

// shareCollector exports the share groups' record counts, per group,
// summed over the share partitions this broker leads (those led
// elsewhere are counted by their leaders: sum over the brokers). The
// totals count since each share partition was loaded on this broker.
type shareCollector struct{ s *Server }

var (
	descShareRecords = prometheus.NewDesc("strata_share_group_records",
		"In-flight records of a share group by state (available, acquired, acknowledged, archiving: waiting for the dead-letter copy, archived), over the share partitions this broker leads.", []string{"group", "state"}, nil)
	descShareAcquired = prometheus.NewDesc("strata_share_group_acquired_records_total",
		"Records a share group's members acquired, over the share partitions this broker leads.", []string{"group"}, nil)
	descShareRedelivered = prometheus.NewDesc("strata_share_group_redelivered_records_total",
		"Records acquired again after a release or lock expiry, over the share partitions this broker leads.", []string{"group"}, nil)
	descShareArchived = prometheus.NewDesc("strata_share_group_archived_records_total",
		"Records archived undelivered: rejected or at group.share.delivery.count.limit, over the share partitions this broker leads.", []string{"group"}, nil)
	descShareDeadLetterWritten = prometheus.NewDesc("strata_share_dead_letter_records_total",
		"Dead-letter records (KIP-1191) this broker wrote, acknowledged by the dead-letter topic, for the share partitions it leads.", []string{"group"}, nil)
	descShareDeadLetterFailed = prometheus.NewDesc("strata_share_dead_letter_failed_records_total",
		"Records this broker archived without a dead-letter copy: the group's dead-letter topic is missing (and not auto-created), invalid, or refused them for good.", []string{"group"}, nil)
	descShareSessions = prometheus.NewDesc("strata_share_sessions",
		"Share sessions open on this broker.", nil, nil)
)

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShareRecords, descShareAcquired, descShareRedelivered, descShareArchived, descShareDeadLetterWritten, descShareDeadLetterFailed, descShareSessions} {
		ch <- d
	}
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	if !s.started.Load() || s.shares == nil {
		return
	}
	type sums struct {
		counts share.Counts
		totals share.Totals
	}
	groups := map[string]*sums{}
	for k, st := range s.shares.Stats() {
		g := groups[k.Group]
		if g == nil {
			g = &sums{}
			groups[k.Group] = g
		}
		g.counts.Available += st.Counts.Available
		g.counts.Acquired += st.Counts.Acquired
		g.counts.Acknowledged += st.Counts.Acknowledged
		g.counts.Archiving += st.Counts.Archiving
		g.counts.Archived += st.Counts.Archived
		g.totals.Acquired += st.Totals.Acquired
		g.totals.Redelivered += st.Totals.Redelivered
		g.totals.Archived += st.Totals.Archived
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v int64, group string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), group)
	}
	for name, g := range groups {
		gauge(descShareRecords, g.counts.Available, name, "available")
		gauge(descShareRecords, g.counts.Acquired, name, "acquired")
		gauge(descShareRecords, g.counts.Acknowledged, name, "acknowledged")
		gauge(descShareRecords, g.counts.Archiving, name, "archiving")
		gauge(descShareRecords, g.counts.Archived, name, "archived")
		counter(descShareAcquired, g.totals.Acquired, name)
		counter(descShareRedelivered, g.totals.Redelivered, name)
		counter(descShareArchived, g.totals.Archived, name)
	}
	if s.shareDLQ != nil {
		for name, c := range s.shareDLQ.counts() {
			counter(descShareDeadLetterWritten, c.written, name)
			counter(descShareDeadLetterFailed, c.failed, name)
		}
	}
	gauge(descShareSessions, s.shares.Sessions.Len())
}
