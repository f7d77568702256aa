package share

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrBadReset is returned for a share.auto.offset.reset that is not
// latest, earliest or by_duration:<ISO-8601 duration>.
var ErrBadReset = errors.New("share: bad share.auto.offset.reset")

// ParseResetDuration parses a share.auto.offset.reset value: for
// "by_duration:PnDTnHnMn.nS" (Kafka's form: days, hours, minutes,
// seconds, each optional, not negative) it returns the duration and
// true; for latest and earliest false.
func ParseResetDuration(v string) (time.Duration, bool, error) {
	switch v {
	case ResetLatest, ResetEarliest:
		return 0, false, nil
	}
	iso, ok := strings.CutPrefix(v, ResetByDuration+":")
	if !ok {
		return 0, false, ErrBadReset
	}
	rest, ok := strings.CutPrefix(strings.ToUpper(iso), "P")
	if !ok || rest == "" {
		return 0, false, ErrBadReset
	}
	datePart, timePart, hasTime := strings.Cut(rest, "T")
	if hasTime && timePart == "" {
		return 0, false, ErrBadReset
	}
	var total time.Duration
	add := func(s string, units map[byte]time.Duration) bool {
		for s != "" {
			i := strings.IndexAny(s, "DHMS")
			if i <= 0 {
				return false
			}
			unit, ok := units[s[i]]
			if !ok {
				return false
			}
			n, err := strconv.ParseFloat(s[:i], 64)
			if err != nil || n < 0 || n > 1e6 || s[i] != 'S' && strings.Contains(s[:i], ".") {
				return false
			}
			total += time.Duration(n * float64(unit))
			s = s[i+1:]
		}
		return true
	}
	if !add(datePart, map[byte]time.Duration{'D': 24 * time.Hour}) ||
		!add(timePart, map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second}) {
		return 0, false, ErrBadReset
	}
	return total, true, nil
}
