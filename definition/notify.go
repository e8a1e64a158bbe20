package definition

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Notify is one entry of a workflow's notify list: the events it is told
// of, and where it goes (a webhook or an EventBridge bus, exactly one):
//
//	notify:
//	  - on: [failed, timed_out, deadline_missed]
//	    webhook: {url: "https://hooks.example.com/T0/B0", secret_env: HOOK_SECRET, format: slack}
//	  - on: [failed]
//	    eventbridge: {bus: default, source: whimbrel}
//	deadline: 2h
type Notify struct {
	// On lists the events (NotifyEvents) that are sent.
	On []string `yaml:"on" json:"on"`
	// Webhook posts the notification to a URL.
	Webhook *Webhook `yaml:"webhook,omitempty" json:"webhook,omitempty"`
	// EventBridge puts it on an EventBridge bus.
	EventBridge *EventBridge `yaml:"eventbridge,omitempty" json:"eventbridge,omitempty"`
}

// Webhook is a notification's HTTP receiver.
type Webhook struct {
	// URL receives a POST (http or https).
	URL string `yaml:"url" json:"url"`
	// SecretEnv names the environment variable, in the delivering
	// participant's environment, whose value signs the body
	// (Whimbrel-Signature: sha256=HMAC); empty: unsigned.
	SecretEnv string `yaml:"secret_env,omitempty" json:"secret_env,omitempty"`
	// Format is json (the default: Whimbrel's own object) or slack (a
	// Slack incoming webhook's {"text": ...}).
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
}

// EventBridge is a notification's EventBridge bus.
type EventBridge struct {
	Bus    string `yaml:"bus,omitempty" json:"bus,omitempty"`       // the event bus name or ARN (default: default)
	Source string `yaml:"source,omitempty" json:"source,omitempty"` // the events' source (default: whimbrel)
}

// NotifyEvents are the events a notify entry may name.
var NotifyEvents = []string{"completed", "failed", "timed_out", "cancelled", "deadline_missed"}

var (
	notifyKeys      = []string{"on", "webhook", "eventbridge"}
	webhookKeys     = []string{"url", "secret_env", "format"}
	eventBridgeKeys = []string{"bus", "source"}
)

// Wants reports whether the entry is sent the event. A run that timed out
// also failed, so an entry that names failed is told of timed_out too.
func (n Notify) Wants(event string) bool {
	return slices.Contains(n.On, event) || (event == "timed_out" && slices.Contains(n.On, "failed"))
}

// checkNotifyNode checks the notify list as written, each problem at its
// line.
func checkNotifyNode(p *problems, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		p.add(v.Line, "notify must be a list of {on, webhook} or {on, eventbridge} entries")
		return
	}
	for i, e := range v.Content {
		e = resolve(e)
		where := fmt.Sprintf("notify entry %d", i+1)
		checkKeys(p, e, where, notifyKeys)
		if e.Kind != yaml.MappingNode {
			continue
		}
		var n Notify
		if err := e.Decode(&n); err != nil {
			p.add(e.Line, "%s: %s", where, strings.TrimPrefix(err.Error(), "yaml: "))
			continue
		}
		for _, problem := range n.problems() {
			line := e.Line
			if f := field(e, problem.field); f != nil {
				line = f.Line
			}
			p.add(line, "%s: %s", where, problem.msg)
		}
		if w := field(e, "webhook"); w != nil {
			checkKeys(p, w, where+": webhook", webhookKeys)
		}
		if b := field(e, "eventbridge"); b != nil {
			checkKeys(p, b, where+": eventbridge", eventBridgeKeys)
		}
	}
}

// checkNotify checks the notify list as decoded (a stored definition, or
// JSON): the same checks as checkNotifyNode, without lines.
func (d *Workflow) checkNotify(p *problems) {
	for i, n := range d.Notify {
		for _, problem := range n.problems() {
			p.add(0, "notify entry %d: %s", i+1, problem.msg)
		}
	}
	if d.Deadline < 0 {
		p.add(0, "deadline %s is negative", time.Duration(d.Deadline))
	}
}

type notifyProblem struct{ field, msg string }

// problems lists what is wrong with one entry, each with the field it is
// about.
func (n Notify) problems() []notifyProblem {
	var out []notifyProblem
	if len(n.On) == 0 {
		out = append(out, notifyProblem{"on", "on: name the events to send, such as [failed, timed_out] (any of " + strings.Join(NotifyEvents, ", ") + ")"})
	}
	for _, ev := range n.On {
		if !slices.Contains(NotifyEvents, ev) {
			msg := fmt.Sprintf("on: unknown event %q (known: %s)", ev, strings.Join(NotifyEvents, ", "))
			if s := suggest(ev, NotifyEvents); s != "" {
				msg = fmt.Sprintf("on: unknown event %q (did you mean %q?)", ev, s)
			}
			out = append(out, notifyProblem{"on", msg})
		}
	}
	switch {
	case (n.Webhook == nil) == (n.EventBridge == nil):
		out = append(out, notifyProblem{"on", "give exactly one of webhook: {url: ...} and eventbridge: {bus: ...}"})
	case n.Webhook != nil:
		if msg := checkWebhookURL(n.Webhook.URL); msg != "" {
			out = append(out, notifyProblem{"webhook", msg})
		}
		if f := n.Webhook.Format; f != "" && f != "json" && f != "slack" {
			out = append(out, notifyProblem{"webhook", fmt.Sprintf("webhook: format %q is not json or slack", f)})
		}
		if s := n.Webhook.SecretEnv; s != "" && !envName(s) {
			out = append(out, notifyProblem{"webhook", fmt.Sprintf("webhook: secret_env %q is not an environment variable's name (letters, digits and _)", s)})
		}
	}
	return out
}

// checkWebhookURL says what is wrong with a webhook's URL, or "".
func checkWebhookURL(s string) string {
	if s == "" {
		return "webhook: url is missing: give the receiver's http(s) URL"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Sprintf("webhook: url %q is not a URL: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("webhook: url %q must start with https:// (or http://)", s)
	case u.Host == "":
		return fmt.Sprintf("webhook: url %q has no host", s)
	}
	return ""
}

func envName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// Notify is the stored definition's notify list.
func (s *Stored) Notify() []Notify { return s.head.Notify }

// Deadline is the stored definition's deadline (0: none).
func (s *Stored) Deadline() Duration { return s.head.Deadline }
