package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
)

// APIError is an error answer of the API, as the console shows it: the
// API's own message and request id, so that an operator can find the
// matching log line.
type APIError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d %s, request %s)", e.Message, e.Status, e.Code, e.RequestID)
}

// apiErrorOf is err as the console shows it, when it is an API answer (or
// one of the console's own refusals).
func apiErrorOf(err error) (*APIError, bool) {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae, true
	}
	var ce *adminclient.Error
	if !errors.As(err, &ce) {
		return nil, false
	}
	if ce.Message == "" {
		// Not the API's envelope: what came, as it came.
		return &APIError{Status: ce.Status, Code: http.StatusText(ce.Status), Message: string(ce.Body), RequestID: ce.RequestID}, true
	}
	return &APIError{Status: ce.Status, Code: ce.Code, Message: ce.Message, RequestID: ce.RequestID}, true
}

// client is the typed client of the API on behalf of the console's caller:
// its calls carry the caller's context (its peer credentials, so the
// policy and the audit see the uid of `lifecycled ui`), marked as coming
// through the console, with the page's request id so both audit lines can
// be matched.
func (c *Console) client(w http.ResponseWriter, r *http.Request) (*adminclient.Client, context.Context) {
	return adminclient.New(inProcess{h: c.apiHandler(), requestID: w.Header().Get("X-Request-Id")}), adminapi.WithConsole(r.Context())
}

// once is the option that makes a form's change happen once: the form's
// key (made when the page was rendered) becomes the Idempotency-Key, so a
// form sent twice changes things once (the second answer is the first one,
// replayed). A request without a usable key gets none.
func once(r *http.Request) adminclient.Option {
	key := r.PostFormValue("once")
	if len(key) > 64 {
		key = ""
	}
	return adminclient.OncePerRoute(key)
}

// inProcess answers the client's requests by calling the API handler in
// this process: the console is served by the daemon itself.
type inProcess struct {
	h         http.Handler
	requestID string
}

func (d inProcess) Do(req *http.Request) (*http.Response, error) {
	if d.h == nil {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: "SYS_CONSOLE_NOT_READY", Message: "the console is not wired to the API yet"}
	}
	req.Host = "localhost"
	if d.requestID != "" {
		req.Header.Set("X-Request-Id", d.requestID)
	}
	rec := &recorder{header: http.Header{}}
	d.h.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{StatusCode: rec.status, Header: rec.header, Body: io.NopCloser(&rec.body), Request: req}, nil
}

// recorder collects one in-process API answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
