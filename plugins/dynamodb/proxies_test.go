package main

// The proxies stand between the plugin and dynalite to play a store that
// is down or throttled, which dynalite itself cannot.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// outageProxy forwards whole requests to dynalite and, while down, breaks
// every connection. A TCP-level cut (plugintest.Proxy) would end requests
// half sent, which dynalite answers by crashing; DynamoDB would not.
type outageProxy struct {
	target string
	srv    *httptest.Server
	mu     sync.Mutex
	down   bool
}

func (p *outageProxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.srv.CloseClientConnections()
	}
}

func (p *outageProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if err != nil || down {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	// A request forwarded completes in dynalite even if the plugin's
	// connection breaks meanwhile.
	req, _ := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.target+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	req.ContentLength = int64(len(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// throttlingProxy sits in front of dynalite and moves part of every
// BatchWriteItem into UnprocessedItems, as a throttled table would: the
// withheld items are removed from the request before it is forwarded, so
// they really are not deleted.
type throttlingProxy struct {
	target string
	mode   string // "half": withhold half of each call with 2+ items; "all": withhold everything
	mu     sync.Mutex
	calls  []time.Time
}

func (p *throttlingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var withheld []json.RawMessage
	var table string
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".BatchWriteItem") {
		p.mu.Lock()
		p.calls = append(p.calls, time.Now())
		p.mu.Unlock()
		var in struct {
			RequestItems map[string][]json.RawMessage
		}
		if err := json.Unmarshal(body, &in); err == nil {
			for tbl, reqs := range in.RequestItems {
				table = tbl
				keep := reqs
				switch {
				case p.mode == "all":
					withheld, keep = reqs, nil
				case len(reqs) > 1:
					withheld, keep = reqs[len(reqs)/2:], reqs[:len(reqs)/2]
				}
				if len(keep) == 0 {
					// Nothing to forward: answer as DynamoDB would.
					out, _ := json.Marshal(map[string]any{"UnprocessedItems": map[string]any{tbl: withheld}})
					writeDynamo(w, out)
					return
				}
				in.RequestItems[tbl] = keep
			}
			body, _ = json.Marshal(in)
		}
	}
	req, _ := http.NewRequest(r.Method, p.target+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	req.ContentLength = int64(len(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if len(withheld) > 0 && resp.StatusCode == 200 {
		var m map[string]any
		if json.Unmarshal(out, &m) == nil {
			un, _ := m["UnprocessedItems"].(map[string]any)
			if un == nil {
				un = map[string]any{}
			}
			un[table] = withheld
			m["UnprocessedItems"] = un
			out, _ = json.Marshal(m)
		}
	}
	for k, v := range resp.Header {
		if k != "Content-Length" && k != "X-Amz-Crc32" {
			w.Header()[k] = v
		}
	}
	w.Header().Set("X-Amz-Crc32", fmt.Sprint(crc32.ChecksumIEEE(out)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func writeDynamo(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", fmt.Sprint(crc32.ChecksumIEEE(body)))
	_, _ = w.Write(body)
}
