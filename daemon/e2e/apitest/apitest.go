// Package apitest is how the end-to-end tests call a daemon's admin API:
// through its typed client (daemon/adminclient), so that no test writes a
// route's path. Its helpers keep each check a test makes on an answer (its
// status, headers and body as they came) short to write.
//
// It is a package of its own, not part of internal/testsvc: the unit tests
// of the packages the client depends on (through daemon/wire) use testsvc,
// which could then not import the client.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Client is the admin client of the daemon on its socket.
func Client(d *testsvc.Daemon) *adminclient.Client { return adminclient.New(d.HTTP()) }

// Ready is the condition that the daemon's readiness (GET /readyz) answers
// 200, for testsvc.Eventually.
func Ready(d *testsvc.Daemon) func() bool {
	return func() bool {
		var a Answer
		_, _ = Record(d, &a).Readyz(context.Background(), false)
		return a.Code == http.StatusOK
	}
}

// Answer is an answer as it came, 2xx or not: its status, headers and body.
// A request that got no answer leaves Code 0 and the error in Body.
type Answer struct {
	Code   int
	Header http.Header
	Body   []byte
}

// Record is the API through a client that records each answer in a (the
// last one), whatever its status.
func Record(d *testsvc.Daemon, a *Answer) *adminclient.Client { return RecordThrough(d.HTTP(), a) }

// RecordThrough is Record with the requests sent through doer (the daemon's
// metrics listener, say).
func RecordThrough(doer adminclient.Doer, a *Answer) *adminclient.Client {
	return adminclient.New(&recorder{doer: doer, answer: a})
}

// Expect is the API through a client that fails t unless each answer has
// status code, and decodes each answer's body, as it came, into out (when
// not nil): the test's own reading of the JSON, beside the typed value the
// method returns.
func Expect(t testing.TB, d *testsvc.Daemon, code int, out any) *adminclient.Client {
	return adminclient.New(&recorder{doer: d.HTTP(), t: t, want: code, out: out})
}

// recorder is a Doer that keeps a copy of each answer's body, records the
// answer and, with t set, checks its status and decodes its body.
type recorder struct {
	doer   adminclient.Doer
	answer *Answer
	t      testing.TB
	want   int
	out    any
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.doer.Do(req)
	if err != nil {
		if r.answer != nil {
			*r.answer = Answer{Body: []byte(err.Error())}
		}
		r.fail(req, "%v", err)
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		r.fail(req, "read the answer: %v", err)
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if r.answer != nil {
		*r.answer = Answer{Code: resp.StatusCode, Header: resp.Header, Body: body}
	}
	if r.t == nil {
		return resp, nil
	}
	if resp.StatusCode != r.want {
		r.fail(req, "status %d, want %d: %s", resp.StatusCode, r.want, body)
	}
	if r.out != nil {
		if err := json.Unmarshal(body, r.out); err != nil {
			r.fail(req, "decode %s: %v", body, err)
		}
	}
	return resp, nil
}

// fail fails the test of an Expect client, naming the request and the line
// of the test that made the call (t.Helper cannot see through the client).
func (r *recorder) fail(req *http.Request, format string, args ...any) {
	if r.t == nil {
		return
	}
	r.t.Fatalf("%s: %s %s: %s", caller(), req.Method, req.URL.RequestURI(), fmt.Sprintf(format, args...))
}

// caller is the file and line of the first caller outside this package and
// the admin client.
func caller() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if !strings.Contains(f.Function, "/daemon/adminclient.") && !strings.Contains(f.Function, "/daemon/e2e/apitest.") {
			return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
		}
		if !more {
			return "?"
		}
	}
}

// Must is the value of a call that succeeded (a 2xx answer); any other
// outcome fails the test:
//
//	m := apitest.Must(apitest.Client(d).Message(ctx, id))(t)
func Must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("the call failed: %v", err)
		}
		return v
	}
}

// Refused is the status and body, as it came, of a call answered outside
// 2xx; a call that succeeded, or got no answer, fails the test:
//
//	code, body := apitest.Refused(apitest.Client(d).RetryMessage(ctx, id))(t)
func Refused[T any](v T, err error) func(testing.TB) (int, []byte) {
	return func(t testing.TB) (int, []byte) {
		t.Helper()
		var e *adminclient.Error
		if err == nil {
			t.Fatalf("the call succeeded (%+v), want it refused", v)
		} else if !errors.As(err, &e) {
			t.Fatalf("the call got no answer: %v", err)
		}
		return e.Status, e.Body
	}
}

// PathOf is the path (and query) a call of the API asks for, found without
// sending it: for a test that names a route outside a request of its own
// (an audit line, a request written by hand, another program's request).
func PathOf(call func(*adminclient.Client)) string {
	var p pathTaker
	call(adminclient.New(&p))
	if p.path == "" {
		panic("apitest.PathOf: the call sent no request")
	}
	return p.path
}

type pathTaker struct{ path string }

func (p *pathTaker) Do(req *http.Request) (*http.Response, error) {
	p.path = req.URL.RequestURI()
	return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}
