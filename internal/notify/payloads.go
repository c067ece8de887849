package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Headers of the generic webhook.
const (
	// SignatureHeader is "sha256=" and the hex HMAC-SHA256 of the body,
	// keyed with the Secret's hmacKey; absent without a key.
	SignatureHeader = "X-Fleet-Signature-256"
	// EventHeader is the message's event.
	EventHeader = "X-Fleet-Event"
	// DeliveryHeader is the message's ID.
	DeliveryHeader = "X-Fleet-Delivery"
)

// Sign is the SignatureHeader value of body under key.
func Sign(key, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return "sha256=" + hex.EncodeToString(h.Sum(nil))
}

// build makes the request that tells t about m.
func build(t Target, m *Message) (request, error) {
	switch t.Type {
	case notification.DestinationWebhook:
		return webhook(t, m)
	case notification.DestinationSlack:
		return chat(t, slack(m))
	case notification.DestinationMSTeams:
		return chat(t, teams(m))
	case notification.DestinationGitHub, notification.DestinationGitLab, notification.DestinationBitbucket, notification.DestinationGitea:
		return commitStatus(t, m)
	}
	return request{}, outcome.Stallf(notification.ReasonInvalidSpec, "unknown destination type %q", t.Type)
}

func needAddress(t Target) error {
	if t.Address == "" {
		return outcome.Stallf(notification.ReasonInvalidSpec, "a %s destination needs an address: spec.destination.address, or the key %q of its Secret",
			t.Type, notification.SecretKeyAddress)
	}
	return nil
}

func webhook(t Target, m *Message) (request, error) {
	if err := needAddress(t); err != nil {
		return request{}, err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return request{}, fmt.Errorf("encoding the message: %w", err)
	}
	h := map[string]string{EventHeader: m.Event, DeliveryHeader: m.ID}
	if len(t.HMACKey) > 0 {
		h[SignatureHeader] = Sign(t.HMACKey, body)
	}
	return request{url: t.Address, body: body, headers: h}, nil
}

func chat(t Target, payload any) (request, error) {
	if err := needAddress(t); err != nil {
		return request{}, err
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return request{}, fmt.Errorf("encoding the message: %w", err)
	}
	return request{url: t.Address, body: body}, nil
}

// SlackMessage is what a Slack incoming webhook is sent: the text (Slack's
// mrkdwn) and, for clients that show attachments, a colored bar.
type SlackMessage struct {
	Text        string            `json:"text"`
	Attachments []SlackAttachment `json:"attachments,omitempty"`
}

// SlackAttachment is a legacy Slack attachment: a colored bar and fields.
type SlackAttachment struct {
	Color    string       `json:"color"`
	Fallback string       `json:"fallback"`
	Fields   []SlackField `json:"fields"`
}

// SlackField is one title and value of an attachment.
type SlackField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

func slack(m *Message) SlackMessage {
	fields := []SlackField{
		{Title: "Revision", Value: ShortRevision(m.Revision), Short: true},
		{Title: "Clusters ready", Value: fmt.Sprintf("%d/%d", m.Clusters.Ready, m.Clusters.Desired), Short: true},
	}
	if m.CommitURL != "" {
		fields = append(fields, SlackField{Title: "Commit", Value: m.CommitURL})
	}
	for _, f := range m.Errors {
		fields = append(fields, SlackField{Title: "Error", Value: f.String()})
	}
	return SlackMessage{Text: m.Text, Attachments: []SlackAttachment{{Color: color(m.Event), Fallback: m.Text, Fields: fields}}}
}

func color(event string) string {
	switch CommitState(event) {
	case StateSuccess:
		return "good"
	case StateFailure:
		return "danger"
	}
	return "#439FE0"
}

// TeamsMessage is what a Microsoft Teams incoming webhook (a Workflows
// "post to a channel when a webhook request is received") is sent: a
// message with one Adaptive Card attachment.
type TeamsMessage struct {
	Type        string            `json:"type"`
	Attachments []TeamsAttachment `json:"attachments"`
}

// TeamsAttachment holds the Adaptive Card.
type TeamsAttachment struct {
	ContentType string       `json:"contentType"`
	ContentURL  *string      `json:"contentUrl"`
	Content     AdaptiveCard `json:"content"`
}

// AdaptiveCard is a minimal Adaptive Card: text blocks and a fact set.
type AdaptiveCard struct {
	Schema  string           `json:"$schema"`
	Type    string           `json:"type"`
	Version string           `json:"version"`
	Body    []map[string]any `json:"body"`
}

// Adaptive Card constants.
const (
	AdaptiveCardContentType = "application/vnd.microsoft.card.adaptive"
	adaptiveCardSchema      = "http://adaptivecards.io/schemas/adaptive-card.json"
)

func teams(m *Message) TeamsMessage {
	facts := make([]map[string]string, 0, 2+len(m.Errors))
	facts = append(facts,
		map[string]string{"title": "Revision", "value": ShortRevision(m.Revision)},
		map[string]string{"title": "Clusters ready", "value": fmt.Sprintf("%d/%d", m.Clusters.Ready, m.Clusters.Desired)})
	for _, f := range m.Errors {
		facts = append(facts, map[string]string{"title": "Error", "value": f.String()})
	}
	style := map[State]string{StateSuccess: "Good", StateFailure: "Attention"}[CommitState(m.Event)]
	if style == "" {
		style = "Accent"
	}
	body := []map[string]any{
		{"type": "TextBlock", "text": fmt.Sprintf("%s %s/%s: %s", m.Kind, m.Namespace, m.Name, m.Event), "weight": "Bolder", "size": "Medium", "color": style, "wrap": true},
		{"type": "TextBlock", "text": m.Text, "wrap": true},
		{"type": "FactSet", "facts": facts},
	}
	if m.CommitURL != "" {
		body = append(body, map[string]any{"type": "TextBlock", "text": "[Commit](" + m.CommitURL + ")", "wrap": true})
	}
	return TeamsMessage{Type: "message", Attachments: []TeamsAttachment{{ContentType: AdaptiveCardContentType,
		Content: AdaptiveCard{Schema: adaptiveCardSchema, Type: "AdaptiveCard", Version: "1.4", Body: body}}}}
}
