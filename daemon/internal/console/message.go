package console

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

type messageData struct {
	M       wire.Message
	Payload payloadView
	Key     string
	History []historyRow
	// The edit form, as filled (the stored message at first).
	Edit replayForm
	// Preview is the dry run's answer, with the payload's diff.
	Preview *replayPreview
	// Replayed is the answer of a replay that was sent.
	Replayed *wire.ReplayResult
}

type historyRow struct {
	At, Kind, Detail string
	UID              *uint32
}

// replayForm is the edit-and-replay form of the message page.
type replayForm struct {
	Payload string
	Headers string // name=value lines that set headers; "name=" with nothing after removes one
	Key     string
	Topic   string
}

type replayPreview struct {
	Body wire.ReplayResult
	Diff []diffLine
}

func (c *Console) loadMessage(w http.ResponseWriter, r *http.Request, p *page, id string) (messageData, bool) {
	var d messageData
	api, ctx := c.client(w, r)
	var err error
	if d.M, err = api.Message(ctx, id); err != nil {
		p.addErr(err)
		return d, false
	}
	d.Payload = viewPayload(d.M.Payload, d.M.PayloadBase64, base64.StdEncoding.DecodeString)
	if d.M.Key != nil {
		d.Key = *d.M.Key
	}
	h, err := api.History(ctx, id)
	p.addErr(err)
	for _, e := range h.Events {
		d.History = append(d.History, historyRow{At: e.At, Kind: e.Kind, Detail: compactJSON(e.Detail), UID: e.UID})
	}
	d.Edit = replayForm{Payload: d.Payload.Text, Key: d.Key, Topic: d.M.OriginalTopic}
	return d, true
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return ""
	}
	return string(raw)
}

// message is a dead letter with its payload, headers, key and history,
// and its actions.
func (c *Console) message(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p := c.newPage(w, r, "Dead letter "+id, "dlq")
	d, ok := c.loadMessage(w, r, p, id)
	p.Data = d
	status := http.StatusOK
	if !ok {
		status = statusOf(p.Errors[0])
	}
	c.render(w, status, "message", p)
}

// messageAction retries, revives or deletes one message.
func (c *Console) messageAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	api, ctx := c.client(w, r)
	var (
		done string
		err  error
	)
	switch action {
	case "retry":
		done = "retried"
		_, err = api.RetryMessage(ctx, id, once(r))
	case "revive":
		done = "revived"
		_, err = api.ReviveMessage(ctx, id, once(r))
	case "delete":
		done = "deleted"
		_, err = api.DeleteMessage(ctx, id)
	default:
		c.refuse(w, r, http.StatusNotFound, "SYS_CONSOLE_NOT_FOUND", "no message action "+action)
		return
	}
	if err != nil {
		p := c.newPage(w, r, "Dead letter "+id, "dlq")
		p.addErr(err)
		d, _ := c.loadMessage(w, r, p, id)
		p.Data = d
		c.render(w, statusOf(err), "message", p)
		return
	}
	if action == "delete" {
		http.Redirect(w, r, "/ui/dlq/search?done=deleted", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/dlq/messages/"+url.PathEscape(id)+"?done="+done, http.StatusSeeOther)
}

// replayBody turns the edit form into the API's replay body: only what
// differs from the stored message is sent (what is left out is taken from
// it). A payload that is JSON goes as JSON, anything else as its bytes.
func replayBody(f replayForm, stored replayForm) (wire.ReplayRequest, error) {
	var body wire.ReplayRequest
	if f.Payload != stored.Payload {
		if json.Valid([]byte(f.Payload)) {
			body.Payload = json.RawMessage(f.Payload)
		} else {
			b64 := base64.StdEncoding.EncodeToString([]byte(f.Payload))
			body.PayloadBase64 = &b64
		}
	}
	if hs := strings.TrimSpace(f.Headers); hs != "" {
		headers := map[string]*string{}
		for _, line := range strings.Split(hs, "\n") {
			line = strings.TrimRight(line, "\r")
			if strings.TrimSpace(line) == "" {
				continue
			}
			name, value, hasValue := strings.Cut(line, "=")
			name = strings.TrimSpace(name)
			if hasValue && value != "" {
				headers[name] = &value
			} else {
				headers[name] = nil
			}
		}
		body.Headers = headers
	}
	if f.Key != stored.Key {
		body.Key = &f.Key
	}
	if f.Topic != stored.Topic {
		topic := strings.TrimSpace(f.Topic)
		body.Topic = &topic
	}
	return body, nil
}

// replay previews (a dry run, with the diff) or sends an edited replay.
// The stored message is never changed; the page shows it as it is.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p := c.newPage(w, r, "Dead letter "+id, "dlq")
	d, ok := c.loadMessage(w, r, p, id)
	if !ok {
		p.Data = d
		c.render(w, statusOf(p.Errors[0]), "message", p)
		return
	}
	stored := d.Edit
	d.Edit = replayForm{Payload: strings.ReplaceAll(r.PostFormValue("payload"), "\r\n", "\n"), Headers: r.PostFormValue("headers"),
		Key: r.PostFormValue("key"), Topic: r.PostFormValue("topic")}
	if d.Payload.Kind == "binary" {
		// A hex dump is for reading: bytes are not edited in a textarea.
		d.Edit.Payload = stored.Payload
	}
	body, err := replayBody(d.Edit, stored)
	if err != nil {
		p.addErr(err)
	}
	send := r.PostFormValue("send") == "1"
	status := http.StatusOK
	if err == nil {
		api, ctx := c.client(w, r)
		key := adminclient.OncePerRoute("")
		if send {
			key = once(r)
		}
		rb, err := api.Replay(ctx, id, &body, !send, key)
		if err != nil {
			p.addErr(err)
			status = statusOf(err)
		} else if send {
			d.Replayed = &rb
			p.Notice = notices["replayed"]
			// The history now has the replay.
			d2, _ := c.loadMessage(w, r, p, id)
			d.History = d2.History
		} else {
			after := viewPayload(rb.Replayed.Payload, rb.Replayed.PayloadBase64, base64.StdEncoding.DecodeString)
			d.Preview = &replayPreview{Body: rb, Diff: lineDiff(d.Payload.Text, after.Text)}
		}
	}
	p.Data = d
	c.render(w, status, "message", p)
}
