package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
)

// ActivityData is what an activity's command handed the wrapper: its
// output (recorded with the outcome) and its latest progress (carried by
// a heartbeat).
type ActivityData struct {
	// Output is the JSON object the command wrote to WHIMBREL_OUTPUT.
	Output json.RawMessage `json:"output,omitempty"`
	// Progress is the latest progress: a JSON object as written, a line
	// as a string.
	Progress     json.RawMessage `json:"progress,omitempty"`
	ProgressTime *time.Time      `json:"progress_time,omitempty"`
	ProgressAge  *float64        `json:"progress_age_seconds,omitempty"`
}

func viewData(a *state.ActivityExec, now time.Time) ActivityData {
	var d ActivityData
	if a.Output != "" {
		d.Output = asJSON(a.Output)
	}
	if a.Progress != "" {
		d.Progress = asJSON(a.Progress)
		if !a.ProgressTime.IsZero() {
			d.ProgressTime = timePtr(a.ProgressTime)
		}
		// The age only while it runs, as the heartbeat's: a settled
		// activity's status reads the same every time.
		if !a.ProgressTime.IsZero() && a.State == state.Running {
			// now was taken before the read: a beat landing in between
			// is no younger than "just now".
			age := max(now.Sub(a.ProgressTime).Seconds(), 0)
			d.ProgressAge = &age
		}
	}
	return d
}

// asJSON is a stored text as JSON: an object as it is, anything else (a
// progress line, a foreign client's malformed output) as a string.
func asJSON(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(s)
	return b
}

// viewParams reads an execution's stored parameters; a foreign client's
// unreadable ones are shown as one entry saying so.
func viewParams(s string) map[string]string {
	if s == "" {
		return nil
	}
	m, err := definition.StoredParams(s)
	if err != nil {
		return map[string]string{"(unreadable)": s}
	}
	return m
}

func writeParams(w io.Writer, params map[string]string) {
	if len(params) == 0 {
		return
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = inert.String(k) + "=" + inert.String(params[k])
	}
	fmt.Fprintf(w, "  params: %s\n", strings.Join(parts, ", "))
}

// textLimit bounds an output or progress shown in the text status; --json
// shows all of it.
const textLimit = 200

func (d ActivityData) writeText(w io.Writer, indent string) {
	if len(d.Progress) > 0 {
		p := string(d.Progress)
		var line string
		if json.Unmarshal(d.Progress, &line) == nil {
			p = line
		}
		age := ""
		if d.ProgressAge != nil {
			age = fmt.Sprintf(" (%s ago)", time.Duration(*d.ProgressAge*float64(time.Second)).Round(time.Second))
		}
		fmt.Fprintf(w, "%sprogress: %s%s\n", indent, clip(inert.String(p)), age)
	}
	if len(d.Output) > 0 {
		fmt.Fprintf(w, "%soutput: %s\n", indent, clip(inert.String(string(d.Output))))
	}
}

func clip(s string) string {
	r := []rune(s)
	if len(r) <= textLimit {
		return s
	}
	return string(r[:textLimit]) + "…"
}
