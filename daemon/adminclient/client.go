// Package adminclient is the typed client of lifecycled's admin API: one
// method per route, taking and returning the types of package wire. The
// CLI, the console, the end-to-end tests and the benches reach the API
// through it, so a route's path is written in two places only: where the
// server registers it (adminapi) and here (paths.go).
//
// A Client sends its requests through a Doer: an *http.Client dialling the
// Unix socket (Unix), or anything else that answers an *http.Request, such
// as the console's in-process call of the API handler.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// maxAnswer bounds what a call reads into memory; the ledger export, which
// can be larger, streams (ExportLedger).
const maxAnswer = 64 << 20

// Doer sends one request; *http.Client is one.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client calls the admin API.
type Client struct {
	doer Doer
}

// New is a client that sends its requests through doer.
func New(doer Doer) *Client { return &Client{doer: doer} }

// Unix is a client of the API on the Unix socket at path.
func Unix(path string) *Client {
	return New(&http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}})
}

// Error is an answer outside 2xx: the API's error envelope (Code, Message,
// RequestID, Details) when the body is one, and the body as it came.
type Error struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	Details   []any
	Body      []byte
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("daemon answered %d: %s", e.Status, strings.TrimSpace(string(e.Body)))
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// StatusOf is the HTTP status of an *Error in err's chain; 0 for any other
// error (the request did not get an answer).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// answerError reads a failing answer; the request id comes from the
// envelope, or from the answer's header when the body is not one.
func answerError(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode, Body: body, RequestID: resp.Header.Get("X-Request-Id")}
	var env wire.ErrorBody
	if json.Unmarshal(body, &env) == nil {
		e.Code, e.Message, e.Details = env.Error.Code, env.Error.Message, env.Error.Details
		if env.Error.RequestID != "" {
			e.RequestID = env.Error.RequestID
		}
	}
	return e
}

// call is one request: the route's method and path, its query and JSON
// body; a 2xx answer is decoded into out (when not nil).
type call struct {
	method string
	path   string
	query  url.Values
	body   any
	out    any
	// stream, when set, receives a 2xx answer as it arrives instead of out.
	stream io.Writer
}

func (c *Client) send(ctx context.Context, k call, opts []Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	req, err := c.request(ctx, k, &o)
	if err != nil {
		return err
	}
	resp, err := c.doer.Do(req)
	if err != nil {
		// The Doer's own error, unwrapped: the CLI turns socket errors into
		// advice and the caller's errors.As must still find them.
		return err
	}
	defer resp.Body.Close()
	if o.status != nil {
		*o.status = resp.StatusCode
	}
	if o.respHeader != nil {
		*o.respHeader = resp.Header
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if ok && k.stream != nil {
		if _, err := io.Copy(k.stream, resp.Body); err != nil {
			return fmt.Errorf("read answer of %s %s: %w", k.method, k.path, err)
		}
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read answer of %s %s: %w", k.method, k.path, err)
	}
	if o.raw != nil {
		*o.raw = data
	}
	if !ok {
		// A failing answer may still carry the route's body (GET /readyz
		// answers 503 with its checks): decode it when it is one.
		if k.out != nil && o.decodeFailure {
			_ = json.Unmarshal(data, k.out)
		}
		return answerError(resp, data)
	}
	if k.out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, k.out); err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", k.method, k.path, err)
		}
	}
	return nil
}

func (c *Client) request(ctx context.Context, k call, o *options) (*http.Request, error) {
	var body io.Reader
	var hasBody bool
	switch {
	case o.body != nil:
		body, hasBody = bytes.NewReader(o.body), true
	case k.body != nil:
		if raw, ok := k.body.([]byte); ok {
			body, hasBody = bytes.NewReader(raw), true
			break
		}
		// Payloads keep their "<" and "&" as typed.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(k.body); err != nil {
			return nil, err
		}
		body, hasBody = &b, true
	}
	query := url.Values{}
	for name, vs := range k.query {
		query[name] = append([]string(nil), vs...)
	}
	for name, vs := range o.query {
		query[name] = append(query[name], vs...)
	}
	u := k.path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, k.method, "http://localhost"+u, body)
	if err != nil {
		return nil, err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	for name, vs := range o.header {
		req.Header[name] = vs
	}
	if k.method == http.MethodPost {
		switch {
		case o.idempotencyKey != "":
			req.Header.Set(idempotencyHeader, o.idempotencyKey)
		case o.oncePerRoute != "":
			req.Header.Set(idempotencyHeader, onceKey(o.oncePerRoute, k.path))
		}
	}
	return req, nil
}
