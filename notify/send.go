package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// The headers of a webhook's request.
const (
	HeaderDeliveryID = "Whimbrel-Delivery-Id"
	HeaderSignature  = "Whimbrel-Signature"
	HeaderEvent      = "Whimbrel-Event"
)

// senders send one delivery to its target.
type senders struct {
	cfg Config

	ebOnce sync.Once
	eb     *eventbridge.Client
	ebErr  error
}

func newSenders(cfg Config) *senders { return &senders{cfg: cfg} }

// send sends a delivery, cut off after the timeout; code is the
// receiver's HTTP status ("error" when there was none).
func (s *senders) send(ctx context.Context, n *state.Notification) (code string, err error) {
	var target definition.Notify
	if err := json.Unmarshal([]byte(n.Target), &target); err != nil {
		return "error", fmt.Errorf("the item's target is not a notify entry: %w", err)
	}
	body := []byte(n.Body)
	if s.cfg.WebURL != "" {
		var b workflow.Body
		if err := json.Unmarshal(body, &b); err == nil {
			b.Link = strings.TrimRight(s.cfg.WebURL, "/") + "/workflows/" + url.PathEscape(n.WorkflowExecID)
			body, _ = json.Marshal(b) // plain fields always marshal
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	switch {
	case target.Webhook != nil:
		return s.webhook(ctx, target.Webhook, n, body)
	case target.EventBridge != nil:
		return s.eventBridge(ctx, target.EventBridge, n, body)
	}
	return "error", errors.New("the item's target names neither a webhook nor an EventBridge bus")
}

// Sign is the Whimbrel-Signature of a body under a secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (s *senders) webhook(ctx context.Context, w *definition.Webhook, n *state.Notification, body []byte) (string, error) {
	if w.Format == "slack" {
		body = slackBody(body)
	}
	where := redact(w.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return "error", fmt.Errorf("webhook %s: %w", where, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "whimbrel")
	req.Header.Set(HeaderDeliveryID, n.DeliveryID)
	req.Header.Set(HeaderEvent, n.Event)
	if w.SecretEnv != "" {
		secret := os.Getenv(w.SecretEnv)
		if secret == "" {
			// Unsigned, a receiver that checks would drop it: better to
			// retry until the deliverer is given the secret.
			return "error", fmt.Errorf("webhook %s: %s is not set in the deliverer's environment: set it where the monitors run", where, w.SecretEnv)
		}
		req.Header.Set(HeaderSignature, Sign(secret, body))
	}
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text holds the whole URL
		}
		return "error", fmt.Errorf("webhook %s: %w", where, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	code := strconv.Itoa(resp.StatusCode)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return code, fmt.Errorf("webhook %s answered %s: %s", where, resp.Status, strings.TrimSpace(string(got)))
	}
	return code, nil
}

// redact is a webhook's URL as errors name it: its scheme and host, for
// its path and query often hold its token (a Slack hook's do), and errors
// are stored, logged and shown.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// slackBody is a Slack incoming webhook's message for a body.
func slackBody(body []byte) []byte {
	var b workflow.Body
	_ = json.Unmarshal(body, &b) // ours: it decodes
	text := fmt.Sprintf("Whimbrel: workflow %s %s (execution %s)", b.WorkflowName, strings.ReplaceAll(b.Event, "_", " "), b.WorkflowExecID)
	if b.Reason != "" {
		text += "\n" + b.Reason
	}
	for _, f := range b.Failed {
		text += fmt.Sprintf("\n• %s %s", f.Name, f.State)
		if f.ExitCode != nil {
			text += fmt.Sprintf(" (exit %d)", *f.ExitCode)
		}
		if f.Stderr != "" {
			text += "\n```" + f.Stderr + "```"
		}
	}
	if b.Link != "" {
		text += "\n" + b.Link
	}
	out, _ := json.Marshal(map[string]string{"text": text}) // strings always marshal
	return out
}

func (s *senders) eventBridge(ctx context.Context, b *definition.EventBridge, n *state.Notification, body []byte) (string, error) {
	s.ebOnce.Do(func() {
		cfg, err := config.LoadDefaultConfig(context.WithoutCancel(ctx))
		if err != nil {
			s.ebErr = fmt.Errorf("configure EventBridge: %w", err)
			return
		}
		s.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) {
			if s.cfg.EventBridgeEndpoint != "" {
				o.BaseEndpoint = aws.String(s.cfg.EventBridgeEndpoint)
			}
			o.HTTPClient = s.cfg.HTTP
		})
	})
	if s.ebErr != nil {
		return "error", s.ebErr
	}
	bus, source := b.Bus, b.Source
	if bus == "" {
		bus = "default"
	}
	if source == "" {
		source = "whimbrel"
	}
	out, err := s.eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(bus), Source: aws.String(source), Detail: aws.String(string(body)),
		DetailType: aws.String("Whimbrel workflow " + strings.ReplaceAll(n.Event, "_", " ")),
		Resources:  []string{},
	}}})
	if err != nil {
		return "error", fmt.Errorf("EventBridge PutEvents on %s: %w", bus, err)
	}
	if out.FailedEntryCount > 0 && len(out.Entries) > 0 {
		e := out.Entries[0]
		return aws.ToString(e.ErrorCode), fmt.Errorf("EventBridge PutEvents on %s: %s: %s", bus, aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
	}
	return "200", nil
}
