package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTime reads a time of --from or --to: RFC 3339 ("2026-11-01T00:00:00Z"),
// a date ("2026-11-01", midnight UTC), "now", or a time relative to now
// ("-30d", "now-12h", "-1w2d"; units s, m, h, d, w).
func ParseTime(s string, now time.Time) (time.Time, error) {
	in := strings.TrimSpace(s)
	switch {
	case in == "":
		return time.Time{}, fmt.Errorf("empty time: give RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01), now, or -30d")
	case in == "now":
		return now, nil
	case strings.HasPrefix(in, "now-"), strings.HasPrefix(in, "-"):
		d, err := ParseDuration(strings.TrimPrefix(strings.TrimPrefix(in, "now"), "-"))
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: %v", s, err)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, in); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, in); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("time %q: give RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01), now, or -30d", s)
}

var durationUnits = map[byte]time.Duration{
	's': time.Second, 'm': time.Minute, 'h': time.Hour,
	'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour,
}

// maxDuration bounds a relative time: ten years back is past any retention,
// and the sum below must not overflow.
const maxDuration = 10 * 365 * 24 * time.Hour

// ParseDuration reads a positive duration of whole units, one or more
// ("30d", "1w2d", "90m"), as Prometheus writes them.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	for rest := s; rest != ""; {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, fmt.Errorf("duration %q: want a number and a unit (s, m, h, d, w), as in 30d or 1w2d", s)
		}
		unit, ok := durationUnits[rest[i]]
		if !ok {
			return 0, fmt.Errorf("duration %q: unknown unit %q (s, m, h, d, w)", s, rest[i])
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || n > int64(maxDuration/unit) {
			return 0, fmt.Errorf("duration %q: too long (at most ten years)", s)
		}
		total += time.Duration(n) * unit
		if total > maxDuration {
			return 0, fmt.Errorf("duration %q: too long (at most ten years)", s)
		}
		rest = rest[i+1:]
	}
	if total <= 0 {
		return 0, fmt.Errorf("duration %q: must be more than zero", s)
	}
	return total, nil
}
