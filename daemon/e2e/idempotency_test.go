package e2e

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
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

// keyed is the answer to a call made with the Idempotency-Key key, as it
// came; an error when the request got no answer.
func keyed(d *testsvc.Daemon, key string, call func(*adminclient.Client, adminclient.Option)) (apitest.Answer, error) {
	var a apitest.Answer
	call(apitest.Record(d, &a), adminclient.IdempotencyKey(key))
	if a.Code == 0 {
		return a, fmt.Errorf("request failed: %s", a.Body)
	}
	return a, nil
}

// retry and deletion are the calls keyed makes.
func retry(id string) func(*adminclient.Client, adminclient.Option) {
	return func(c *adminclient.Client, key adminclient.Option) { c.RetryMessage(context.Background(), id, key) }
}

func deletion(tenant string) func(*adminclient.Client, adminclient.Option) {
	return func(c *adminclient.Client, key adminclient.Option) {
		c.RequestDeletion(context.Background(), tenant, nil, key)
	}
}

func TestIdempotencyKeyRules(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			s := newIdemSetup(t, state, "")
			d := s.d
			key := uuid.NewString()

			// First request runs the work; the replay returns the same body,
			// marked replayed, and the work is not done again.
			var first []byte
			apitest.Expect(t, d, 200, nil).RetryMessage(t.Context(), s.ids[0], adminclient.IdempotencyKey(key), adminclient.Raw(&first))
			r, err := keyed(d, key, retry(s.ids[0]))
			require.NoError(t, err)
			require.Equal(t, 200, r.Code)
			require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
			require.Equal(t, string(first), string(r.Body), "identical body")
			require.Equal(t, 1, s.republished(t, s.ids[0]), "republished once")

			// The same key on another path or with another body: mismatch.
			code, body := apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), s.ids[1], adminclient.IdempotencyKey(key)))(t)
			require.Equal(t, 409, code, "%s", body)
			require.Equal(t, "SYS_IDEMPOTENCY_KEY_MISMATCH", decodeEnvelope(t, body).Error.Code)
			code, body = apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), s.ids[0], adminclient.IdempotencyKey(key), adminclient.Body([]byte(`{"x":1}`))))(t)
			require.Equal(t, 409, code)
			require.Equal(t, "SYS_IDEMPOTENCY_KEY_MISMATCH", decodeEnvelope(t, body).Error.Code)
			require.Equal(t, 0, s.republished(t, s.ids[1]), "a mismatch runs nothing")

			// Bad keys.
			for _, bad := range []string{strings.Repeat("k", 256), "with\x01control", "tab\tinside", ""} {
				// Go's client refuses to send control characters; write the request by hand.
				path := apitest.PathOf(func(c *adminclient.Client) { c.RetryMessage(t.Context(), s.ids[1]) })
				code, body = rawHTTP(t, d.Socket, "POST "+path+" HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: "+bad+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
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
			var wg sync.WaitGroup
			var mu sync.Mutex
			outcomes := map[string]int{}
			for i := 0; i < 20; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := keyed(d, key2, retry(s.ids[2]))
					require.NoError(t, err)
					k := fmt.Sprint(r.Code)
					if r.Header.Get("Idempotent-Replayed") == "true" {
						k = "replayed"
					} else if r.Code == 409 {
						k = decodeEnvelope(t, r.Body).Error.Code
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
			r1, err := keyed(d, key3, deletion(tenant))
			require.NoError(t, err)
			require.Equal(t, 202, r1.Code)
			job := waitJob(t, d, tenant, "COMPLETED", time.Minute)
			r2, err := keyed(d, key3, deletion(tenant))
			require.NoError(t, err)
			require.Equal(t, 202, r2.Code)
			require.Equal(t, "true", r2.Header.Get("Idempotent-Replayed"))
			require.Equal(t, string(r1.Body), string(r2.Body))
			latest := waitJob(t, d, tenant, "COMPLETED", time.Minute)
			require.Equal(t, job.ID, latest.ID, "one deletion job: the replay created none")

			require.Contains(t, metrics(t, d), `lifecycled_idempotency_requests_total{result="mismatch"} 2`)
		})
	}
}

func TestIdempotencyMismatchStatus422AndExpiry(t *testing.T) {
	t.Parallel()
	s := newIdemSetup(t, "sqlite", "[idempotency]\nmismatch_status = 422\nttl = \"2s\"\n")
	d := s.d
	key := uuid.NewString()
	tenant := uuid.NewString()
	r1, err := keyed(d, key, deletion(tenant))
	require.NoError(t, err)
	require.Equal(t, 202, r1.Code)
	code, body := apitest.Refused(apitest.Client(d).RequestDeletion(t.Context(), uuid.NewString(), nil, adminclient.IdempotencyKey(key)))(t)
	require.Equal(t, 422, code, "%s", body)
	require.Equal(t, "SYS_IDEMPOTENCY_KEY_MISMATCH", decodeEnvelope(t, body).Error.Code)

	first := waitJob(t, d, tenant, "COMPLETED", time.Minute)
	time.Sleep(2500 * time.Millisecond) // past the TTL: the key is new again
	r2, err := keyed(d, key, deletion(tenant))
	require.NoError(t, err)
	require.Equal(t, 202, r2.Code)
	require.Empty(t, r2.Header.Get("Idempotent-Replayed"), "an expired key is treated as new")
	var j jobBody
	require.NoError(t, json.Unmarshal(r2.Body, &j))
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
	apitest.Expect(t, d, 200, nil).RetryMessage(t.Context(), s.ids[0], adminclient.IdempotencyKey(key))

	// Another uid sends the same key for another message: not a mismatch
	// and not a replay of root's answer; its own request runs.
	cmd := exec.CommandContext(testsvc.Context(t, time.Minute), curl, "-sS", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", d.Socket,
		"-X", "POST", "-H", "Idempotency-Key: "+key, "http://localhost"+apitest.PathOf(func(c *adminclient.Client) { c.RetryMessage(t.Context(), s.ids[1]) }))
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
