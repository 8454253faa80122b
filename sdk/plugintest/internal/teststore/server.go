// Package teststore is a tiny key-value store that the conformance kit's own
// tests erase tenants from: a TCP server holding items per tenant (compared
// byte for byte), and a client for the plugins under test. It exists so that
// the kit can be run against plugins that are wrong on purpose, each in one
// way, and shown to fail them; no real store makes such plugins that simple.
//
// The protocol is one line per request and one per answer, every argument
// a Go-quoted string or a number:
//
//	AUTH "user" "password"   -> OK "session-token"
//	COUNT "tenant"           -> OK 12
//	DELETE "tenant" 100      -> OK 100   (up to 100 items, one at a time)
//	TENANTS                  -> OK "a" "b" ...
//	PING                     -> OK
//
// and ERR "message" on failure.
package teststore

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Server is an in-memory store. The test's fixture reads and writes its
// items directly (Seed, Items); plugins reach it over TCP.
type Server struct {
	User, Password string
	// Delay is how long deleting one item takes, so that a Delete of a few
	// thousand items lasts long enough to be cancelled part way.
	Delay time.Duration

	mu      sync.Mutex
	items   map[string]map[string]string // tenant -> key -> value
	addr    string
	ln      net.Listener
	conns   map[net.Conn]bool
	tokens  []string
	stopped bool
	failing bool
}

// Fail makes the server fail every request (while on): a DELETE first
// deletes half of its batch, as a statement that breaks part way does.
func (s *Server) Fail(on bool) {
	s.mu.Lock()
	s.failing = on
	s.mu.Unlock()
}

func (s *Server) isFailing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failing
}

// NewServer listens on a free port of 127.0.0.1.
func NewServer(user, password string) (*Server, error) {
	s := &Server{User: user, Password: password, items: map[string]map[string]string{}, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

// Addr is host:port.
func (s *Server) Addr() string { return s.addr }

// Tokens are the session tokens handed out so far (secrets a plugin must
// never show).
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tokens...)
}

// Stop closes the listener and every connection, as a crashed server
// would; the items stay for Start.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	_ = s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.conns = map[net.Conn]bool{}
}

// Start listens again on the same address.
func (s *Server) Start() error {
	s.mu.Lock()
	if !s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger for a moment
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.stopped = false
	s.mu.Unlock()
	s.serve(ln)
	return nil
}

// Close stops the server for good.
func (s *Server) Close() { s.Stop() }

func (s *Server) serve(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				_ = c.Close()
				return
			}
			s.conns[c] = true
			s.mu.Unlock()
			go s.handle(c)
		}
	}()
}

// Seed adds n items to tenant (keys continue after the ones it has).
func (s *Server) Seed(tenant string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.items[tenant]
	if m == nil {
		m = map[string]string{}
		s.items[tenant] = m
	}
	start := len(m)
	for i := start; i < start+n; i++ {
		m[fmt.Sprintf("item-%07d", i)] = fmt.Sprintf("value %d of %q", i, tenant)
	}
}

// Items returns a copy of the tenant's items.
func (s *Server) Items(tenant string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.items[tenant] {
		out[k] = v
	}
	return out
}

func (s *Server) handle(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	authed := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd, args, err := parseLine(line)
		var answer string
		switch {
		case err != nil:
			answer = errLine("bad request: " + err.Error())
		case cmd == "AUTH":
			if len(args) == 2 && args[0] == s.User && args[1] == s.Password {
				authed = true
				answer = "OK " + strconv.Quote(s.newToken())
			} else {
				answer = errLine("access denied")
			}
		case !authed:
			answer = errLine("not authenticated")
		case s.isFailing():
			if cmd == "DELETE" && len(args) == 2 {
				if limit, err := strconv.Atoi(args[1]); err == nil && limit > 1 {
					s.delete(args[0], limit/2)
				}
			}
			answer = errLine("internal failure: disk I/O error")
		case cmd == "PING":
			answer = "OK"
		case cmd == "COUNT" && len(args) == 1:
			s.mu.Lock()
			n := len(s.items[args[0]])
			s.mu.Unlock()
			answer = "OK " + strconv.Itoa(n)
		case cmd == "TENANTS":
			answer = "OK" + s.tenantList()
		case cmd == "DELETE" && len(args) == 2:
			limit, err := strconv.Atoi(args[1])
			if err != nil || limit < 1 {
				answer = errLine("bad limit")
				break
			}
			answer = "OK " + strconv.Itoa(s.delete(args[0], limit))
		default:
			answer = errLine("unknown request " + cmd)
		}
		if _, err := c.Write([]byte(answer + "\n")); err != nil {
			return
		}
	}
}

func (s *Server) newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	tok := "tok-" + hex.EncodeToString(b)
	s.mu.Lock()
	s.tokens = append(s.tokens, tok)
	s.mu.Unlock()
	return tok
}

func (s *Server) tenantList() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for t, m := range s.items {
		if len(m) > 0 {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	out := ""
	for _, n := range names {
		out += " " + strconv.Quote(n)
	}
	return out
}

// delete removes up to limit items of tenant, lowest keys first, one at a
// time with Delay between them, as a slow store would.
func (s *Server) delete(tenant string, limit int) int {
	s.mu.Lock()
	keys := make([]string, 0, len(s.items[tenant]))
	for k := range s.items[tenant] {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	sort.Strings(keys)
	n := 0
	for _, k := range keys[:min(limit, len(keys))] {
		s.mu.Lock()
		if s.stopped { // a crashed server finishes nothing
			s.mu.Unlock()
			break
		}
		_, ok := s.items[tenant][k]
		delete(s.items[tenant], k)
		s.mu.Unlock()
		if ok {
			n++
		}
		if s.Delay > 0 {
			time.Sleep(s.Delay)
		}
	}
	return n
}

func errLine(msg string) string { return "ERR " + strconv.Quote(msg) }
