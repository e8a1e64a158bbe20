package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultWarnEvery is how often RateLimit lets the same log line through.
const DefaultWarnEvery = 10 * time.Second

// QuietLogger is the logger of a command that shows its own progress
// (whimbrel run): at the default level only warnings, since the progress
// tells what happens and the launcher's and monitor's own lines would only
// repeat it; --log-level debug shows them. Repeated text lines are
// rate-limited: the launcher and monitor retry through a store outage, and
// once every few seconds is enough to say so. Debugging sees all.
func (f LogFlags) QuietLogger(name string, w io.Writer) hclog.Logger {
	if f.LogFormat == "text" && f.LogLevel != "debug" && f.LogLevel != "trace" {
		w = RateLimit(w, DefaultWarnEvery)
	}
	log := f.Logger(name, w)
	if f.LogLevel == "info" {
		log.SetLevel(hclog.Warn)
	}
	return log
}

// RateLimit returns a writer for a text logger that lets the same line (its
// level, logger name and message; the time and fields aside) through at
// most once per every, and says how many it held back when it next lets one
// through: a store outage then reads as a few warnings, not a flood. Each
// Write must be one whole line, as hclog writes them.
func RateLimit(w io.Writer, every time.Duration) io.Writer {
	return &rateLimited{w: w, every: every, seen: map[string]*seenLine{}, now: time.Now}
}

type rateLimited struct {
	mu    sync.Mutex
	w     io.Writer
	every time.Duration
	seen  map[string]*seenLine
	now   func() time.Time
}

type seenLine struct {
	last time.Time
	held int
}

// lineKey is a text log line without its time and fields:
// "2026-11-23T14:57:46.981Z [WARN]  whimbrel.launcher: claim failed: error=…"
// becomes "[WARN]  whimbrel.launcher: claim failed".
func lineKey(line string) string {
	if _, rest, ok := strings.Cut(line, " "); ok && strings.HasPrefix(rest, "[") {
		line = rest
	}
	parts := strings.SplitN(line, ": ", 3)
	return strings.Join(parts[:min(2, len(parts))], ": ")
}

func (r *rateLimited) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := lineKey(strings.TrimRight(string(p), "\n"))
	now := r.now()
	s := r.seen[key]
	if s != nil && now.Sub(s.last) < r.every {
		s.held++
		return len(p), nil
	}
	if s == nil {
		s = &seenLine{}
		r.seen[key] = s
	}
	held := s.held
	s.last, s.held = now, 0
	if _, err := r.w.Write(p); err != nil {
		return 0, err
	}
	if held > 0 {
		if _, err := fmt.Fprintf(r.w, "  (%d more like the line above in the last %s were held back)\n", held, r.every); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
