package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/internal/wire"
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

// do makes one API request on behalf of the console's caller: the
// caller's context (its peer credentials, so the policy and the audit see
// the uid of `lifecycled ui`), marked as coming through the console, with
// the page's request id so both audit lines can be matched.
func (c *Console) do(w http.ResponseWriter, r *http.Request, method, path string, query url.Values, body any, hdr http.Header) (*recorder, error) {
	h := c.apiHandler()
	if h == nil {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Code: "SYS_CONSOLE_NOT_READY", Message: "the console is not wired to the API yet"}
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		// Payloads keep their "<" and "&" as typed.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			return nil, err
		}
		rd = &b
	}
	u := path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(adminapi.WithConsole(r.Context()), method, "http://localhost"+u, rd)
	if err != nil {
		return nil, err
	}
	req.Host = "localhost"
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if id := w.Header().Get("X-Request-Id"); id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, req)
	return rec, nil
}

// call is do for a JSON answer: out, when not nil, receives the body of a
// 2xx answer; any other answer is an *APIError.
func (c *Console) call(w http.ResponseWriter, r *http.Request, method, path string, query url.Values, body any, out any) (int, error) {
	return c.callWith(w, r, method, path, query, body, out, nil)
}

func (c *Console) callWith(w http.ResponseWriter, r *http.Request, method, path string, query url.Values, body any, out any, hdr http.Header) (int, error) {
	rec, err := c.do(w, r, method, path, query, body, hdr)
	if err != nil {
		return 0, err
	}
	if rec.status < 200 || rec.status > 299 {
		return rec.status, rec.apiError()
	}
	if out != nil {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return rec.status, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return rec.status, nil
}

func (rec *recorder) apiError() *APIError {
	var eb wire.ErrorBody
	if err := json.Unmarshal(rec.body.Bytes(), &eb); err != nil || eb.Error.Message == "" {
		return &APIError{Status: rec.status, Code: http.StatusText(rec.status), Message: rec.body.String(), RequestID: rec.header.Get("X-Request-Id")}
	}
	return &APIError{Status: rec.status, Code: eb.Error.Code, Message: eb.Error.Message, RequestID: eb.Error.RequestID}
}

// callOnce is call for the change a form makes: the form's key (made when
// the page was rendered) is the Idempotency-Key, so a form sent twice
// changes things once (the second answer is the first one, replayed).
func (c *Console) callOnce(w http.ResponseWriter, r *http.Request, method, path string, query url.Values, body any, out any) (int, error) {
	var hdr http.Header
	if once := r.PostFormValue("once"); once != "" && len(once) <= 64 && method == http.MethodPost {
		// One key per form and API route: a form that makes two calls
		// makes two keys.
		sum := sha256.Sum256([]byte(path))
		hdr = http.Header{idempotency.Header: {"console-" + once + "-" + hex.EncodeToString(sum[:8])}}
	}
	return c.callWith(w, r, method, path, query, body, out, hdr)
}

// get is call for GET without a body.
func (c *Console) get(w http.ResponseWriter, r *http.Request, path string, query url.Values, out any) error {
	_, err := c.call(w, r, http.MethodGet, path, query, nil, out)
	return err
}
