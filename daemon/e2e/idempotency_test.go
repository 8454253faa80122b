package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// idemSetup is a daemon with a Kafka source and a Redis deleter, on the
// given state store, and a few dead letters to retry.
type idemSetup struct {
	d     *testsvc.Daemon
	k     *testsvc.KafkaBroker
	redis *testsvc.RedisServer
	ids   []string
}

func newIdemSetup(t *testing.T, state, extra string) *idemSetup {
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	r := testsvc.Redis(t)
	o := testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + retryBlock(false, "1m") + redisDeleter(r.Addr) + `
[deletion]
poll_interval = "100ms"
retry_initial_delay = "200ms"
` + extra}
	if state == "postgres" {
		o.State = testsvc.PGDatabase(t)
	}
	d := testsvc.StartDaemon(t, o)
	for i := 0; i < 3; i++ {
		k.Kcat(t, fmt.Sprintf(`{"n":%d}`, i)+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=e")
	}
	var ids []string
	for _, m := range waitTotal(t, d, "orders.dlq.v1", 3, time.Minute).Messages {
		ids = append(ids, m.ID)
	}
	return &idemSetup{d: d, k: k, redis: r, ids: ids}
}

// republished counts records on the original topic carrying x-dlq-id = id.
func (s *idemSetup) republished(t *testing.T, id string) int {
	n := 0
	for _, m := range consumeKcat(t, s.k, "orders.events.v1") {
		if v, _ := header(m, "x-dlq-id"); v == id {
			n++
		}
	}
	return n
}

type rawResponse struct {
	code   int
	header http.Header
	body   []byte
}

func rawPost(d *testsvc.Daemon, path, key string, body []byte) (rawResponse, error) {
	code, h, b := d.DoResponse("POST", path, body, map[string]string{"Idempotency-Key": key})
	if code == 0 {
		return rawResponse{}, fmt.Errorf("request failed: %s", b)
	}
	return rawResponse{code: code, header: h, body: b}, nil
}

func TestIdempotencyKeyRules(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			s := newIdemSetup(t, state, "")
			d := s.d
			key := uuid.NewString()
			path := "/api/v1/dlq/messages/" + s.ids[0] + "/retry"

			// First request runs the work; the replay returns the same body,
			// marked replayed, and the work is not done again.
			code, first := d.Do("POST", path, nil, map[string]string{"Idempotency-Key": key})
			require.Equal(t, 200, code, "%s", first)
			r, err := rawPost(d, path, key, nil)
			require.NoError(t, err)
			require.Equal(t, 200, r.code)
			require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
			require.Equal(t, string(first), string(r.body), "identical body")
			require.Equal(t, 1, s.republished(t, s.ids[0]), "republished once")

			// The same key on another path or with another body: mismatch.
			code, body := d.Do("POST", "/api/v1/dlq/messages/"+s.ids[1]+"/retry", nil, map[string]string{"Idempotency-Key": key})
			require.Equal(t, 409, code, "%s", body)
			require.Equal(t, "SYS_IDEMPOTENCY_KEY_MISMATCH", decodeEnvelope(t, body).Error.Code)
			code, body = d.Do("POST", path, []byte(`{"x":1}`), map[string]string{"Idempotency-Key": key})
			require.Equal(t, 409, code)
			require.Equal(t, "SYS_IDEMPOTENCY_KEY_MISMATCH", decodeEnvelope(t, body).Error.Code)
			require.Equal(t, 0, s.republished(t, s.ids[1]), "a mismatch runs nothing")

			// Bad keys.
			for _, bad := range []string{strings.Repeat("k", 256), "with\x01control", "tab\tinside", ""} {
				// Go's client refuses to send control characters; write the request by hand.
				code, body = rawHTTP(t, d.Socket, "POST /api/v1/dlq/messages/"+s.ids[1]+"/retry HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: "+bad+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				require.Equal(t, 400, code, "%q: %s", bad, body)
				if strings.Contains(bad, "\x01") {
					// net/http refuses the malformed header before any handler
					// runs; it answers 400 in plain text.
					continue
				}
				require.Equal(t, "SYS_IDEMPOTENCY_VALIDATION_ERROR", decodeEnvelope(t, body).Error.Code)
			}
			require.Equal(t, 0, s.republished(t, s.ids[1]))

			// Twenty concurrent requests with one key: one execution; the
			// others replay or are told it is in flight.
			key2 := uuid.NewString()
			path2 := "/api/v1/dlq/messages/" + s.ids[2] + "/retry"
			var wg sync.WaitGroup
			var mu sync.Mutex
			outcomes := map[string]int{}
			for i := 0; i < 20; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := rawPost(d, path2, key2, nil)
					require.NoError(t, err)
					k := fmt.Sprint(r.code)
					if r.header.Get("Idempotent-Replayed") == "true" {
						k = "replayed"
					} else if r.code == 409 {
						k = decodeEnvelope(t, r.body).Error.Code
					}
					mu.Lock()
					outcomes[k]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			t.Logf("20 concurrent requests: %v", outcomes)
			require.Equal(t, 1, outcomes["200"], "exactly one execution")
			require.Equal(t, 19, outcomes["replayed"]+outcomes["SYS_IDEMPOTENCY_IN_FLIGHT"])
			require.Equal(t, 1, s.republished(t, s.ids[2]))

			// A tenant deletion stores its 202 and job under the key.
			tenant := uuid.NewString()
			key3 := uuid.NewString()
			r1, err := rawPost(d, "/api/v1/tenants/"+tenant+"/deletion", key3, nil)
			require.NoError(t, err)
			require.Equal(t, 202, r1.code)
			job := waitJob(t, d, tenant, "COMPLETED", time.Minute)
			r2, err := rawPost(d, "/api/v1/tenants/"+tenant+"/deletion", key3, nil)
			require.NoError(t, err)
			require.Equal(t, 202, r2.code)
			require.Equal(t, "true", r2.header.Get("Idempotent-Replayed"))
			require.Equal(t, string(r1.body), string(r2.body))
			latest := waitJob(t, d, tenant, "COMPLETED", time.Minute)
			require.Equal(t, job.ID, latest.ID, "one deletion job: the replay created none")

			var metrics string
			_, mb := d.Do("GET", "/metrics", nil, nil)
			metrics = string(mb)
			require.Contains(t, metrics, `lifecycled_idempotency_requests_total{result="mismatch"} 2`)
		})
	}
}

func TestIdempotencyMismatchStatus422AndExpiry(t *testing.T) {
	t.Parallel()
	s := newIdemSetup(t, "sqlite", "[idempotency]\nmismatch_status = 422\nttl = \"2s\"\n")
	d := s.d
	key := uuid.NewString()
	tenant := uuid.NewString()
	r1, err := rawPost(d, "/api/v1/tenants/"+tenant+"/deletion", key, nil)
	require.NoError(t, err)
	require.Equal(t, 202, r1.code)
	code, body := d.Do("POST", "/api/v1/tenants/"+uuid.NewString()+"/deletion", nil, map[string]string{"Idempotency-Key": key})
	require.Equal(t, 422, code, "%s", body)
	require.Equal(t, "SYS_IDEMPOTENCY_KEY_MISMATCH", decodeEnvelope(t, body).Error.Code)

	first := waitJob(t, d, tenant, "COMPLETED", time.Minute)
	time.Sleep(2500 * time.Millisecond) // past the TTL: the key is new again
	r2, err := rawPost(d, "/api/v1/tenants/"+tenant+"/deletion", key, nil)
	require.NoError(t, err)
	require.Equal(t, 202, r2.code)
	require.Empty(t, r2.header.Get("Idempotent-Replayed"), "an expired key is treated as new")
	var j jobBody
	require.NoError(t, json.Unmarshal(r2.body, &j))
	require.NotEqual(t, first.ID, j.ID, "the work ran again: a new job")
}

func TestIdempotencyKeysAreScopedByCaller(t *testing.T) {
	t.Parallel()
	testsvc.Need(t, os.Getuid() == 0, "needs root to make a request as another user")
	curl := testsvc.Tool(t, "curl", "Debian package curl; make test-deps installs it")
	s := newIdemSetup(t, "sqlite", "")
	d := s.d
	// Let user nobody reach the socket through its group.
	require.NoError(t, os.Chmod(d.Dir, 0o755))
	require.NoError(t, os.Chown(d.Socket, 0, 65534))
	key := "shared-key-1"
	code, body := d.Do("POST", "/api/v1/dlq/messages/"+s.ids[0]+"/retry", nil, map[string]string{"Idempotency-Key": key})
	require.Equal(t, 200, code, "%s", body)

	// Another uid sends the same key for another message: not a mismatch
	// and not a replay of root's answer; its own request runs.
	cmd := exec.CommandContext(testsvc.Context(t, time.Minute), curl, "-sS", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", d.Socket,
		"-X", "POST", "-H", "Idempotency-Key: "+key, "http://localhost/api/v1/dlq/messages/"+s.ids[1]+"/retry")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "200", lines[len(lines)-1], out.String())
	require.Contains(t, out.String(), s.ids[1], "its own answer, not root's")
	require.Equal(t, 1, s.republished(t, s.ids[1]))
	require.Contains(t, d.Logs(), `"uid":65534`, "audited with the other uid")
}

// rawHTTP sends a hand-written request over the socket.
func rawHTTP(t *testing.T, socket, request string) (int, []byte) {
	c, err := net.Dial("unix", socket)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, request)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
