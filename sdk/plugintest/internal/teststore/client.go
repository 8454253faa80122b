package teststore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// DSN is where a client connects, in go-sql-driver's form
// "user:password@tcp(host:port)/kv", so that the kit's checks see the same
// kind of connection string a MySQL plugin holds.
type DSN struct {
	User, Password, Addr string
}

// ParseDSN reads user:password@tcp(host:port)/kv. The password may hold any
// character: the address starts after the last '@'.
func ParseDSN(s string) (DSN, error) {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return DSN{}, errors.New("no '@': want user:password@tcp(host:port)/kv")
	}
	cred, rest := s[:at], s[at+1:]
	user, password, ok := strings.Cut(cred, ":")
	if !ok || user == "" {
		return DSN{}, errors.New("no user:password before '@'")
	}
	if !strings.HasPrefix(rest, "tcp(") || !strings.Contains(rest, ")") {
		return DSN{}, errors.New("the address must be tcp(host:port)")
	}
	addr := rest[len("tcp("):strings.Index(rest, ")")]
	return DSN{User: user, Password: password, Addr: addr}, nil
}

// String is the DSN as written.
func (d DSN) String() string { return fmt.Sprintf("%s:%s@tcp(%s)/kv", d.User, d.Password, d.Addr) }

// ErrServer is an error the server answered (as opposed to the network).
type ErrServer struct{ Msg string }

func (e *ErrServer) Error() string { return "store: " + e.Msg }

// Client is one connection, used by one request at a time.
type Client struct {
	mu    sync.Mutex
	conn  net.Conn
	r     *bufio.Reader
	Token string // the session token AUTH returned
}

// Dial connects and authenticates.
func Dial(ctx context.Context, d DSN) (*Client, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", d.Addr)
	if err != nil {
		return nil, err
	}
	c := &Client{conn: conn, r: bufio.NewReader(conn)}
	fields, err := c.do(ctx, "AUTH", d.User, d.Password)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if len(fields) != 1 {
		conn.Close()
		return nil, errors.New("store: bad AUTH answer")
	}
	c.Token = fields[0]
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Count returns how many items tenant has.
func (c *Client) Count(ctx context.Context, tenant string) (int64, error) {
	f, err := c.do(ctx, "COUNT", tenant)
	if err != nil {
		return 0, err
	}
	return number(f)
}

// Delete deletes up to limit items of tenant and returns how many it did.
func (c *Client) Delete(ctx context.Context, tenant string, limit int) (int64, error) {
	f, err := c.do(ctx, "DELETE", tenant, strconv.Itoa(limit))
	if err != nil {
		return 0, err
	}
	return number(f)
}

// Tenants lists every tenant with items.
func (c *Client) Tenants(ctx context.Context) ([]string, error) { return c.do(ctx, "TENANTS") }

// Ping checks the connection.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.do(ctx, "PING")
	return err
}

func number(f []string) (int64, error) {
	if len(f) != 1 {
		return 0, errors.New("store: bad answer")
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// do sends one request and reads its answer. A cancelled ctx closes the
// connection at once, as database drivers do, so the caller sees the
// cancellation; the server may still finish the request.
func (c *Client) do(ctx context.Context, cmd string, args ...string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	line := cmd
	for i, a := range args {
		if cmd == "DELETE" && i == 1 {
			line += " " + a
			continue
		}
		line += " " + strconv.Quote(a)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	answer, err := c.r.ReadString('\n')
	if err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	word, fields, err := parseLine(answer)
	if err != nil {
		return nil, err
	}
	if word == "ERR" {
		msg := ""
		if len(fields) > 0 {
			msg = fields[0]
		}
		return nil, &ErrServer{Msg: msg}
	}
	return fields, nil
}

func (c *Client) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// parseLine splits "WORD arg arg" where each arg is a quoted string or a
// bare token.
func parseLine(line string) (string, []string, error) {
	line = strings.TrimRight(line, "\r\n")
	word, rest, _ := strings.Cut(line, " ")
	var out []string
	for {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			return word, out, nil
		}
		if rest[0] == '"' {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return "", nil, err
			}
			s, _ := strconv.Unquote(q)
			out = append(out, s)
			rest = rest[len(q):]
			continue
		}
		tok, tail, _ := strings.Cut(rest, " ")
		out = append(out, tok)
		rest = tail
	}
}
