package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.0.0"

type config struct {
	Addr      string   `json:"addr"`
	Username  string   `json:"username"`
	Password  string   `json:"password"`
	DB        int      `json:"db"`
	TLS       bool     `json:"tls"`
	Patterns  []string `json:"patterns"`
	ScanCount int      `json:"scan_count"`
	BatchSize int      `json:"batch_size"`
	Workers   int      `json:"workers"`
}

type deleter struct {
	mu     sync.Mutex
	cfg    config
	format string // the daemon's tenant_id_format
	client *redis.Client
	// fps computes plan fingerprints; Delete checks the daemon's against
	// the config it deletes with (a reload may have changed it since).
	fps sdk.Fingerprints
}

func (d *deleter) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{ScanCount: 2000, BatchSize: 500, Workers: 4}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	if cfg.Addr == "" {
		problems = append(problems, sdk.FieldError{Field: "addr", Problem: "required (host:port)"})
	} else if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		problems = append(problems, sdk.FieldError{Field: "addr", Problem: "must be host:port"})
	}
	if len(cfg.Patterns) == 0 {
		problems = append(problems, sdk.FieldError{Field: "patterns", Problem: `required, e.g. ["session:{tenant}:*"]`})
	}
	if err := sdk.ValidateTenantIDFormat(req.TenantIDFormat); err != nil {
		return nil, err
	}
	for i, p := range cfg.Patterns {
		field := fmt.Sprintf("patterns[%d]", i)
		if strings.Count(p, placeholder) != 1 {
			problems = append(problems, sdk.FieldError{Field: field, Problem: "must contain {tenant} exactly once"})
			continue
		}
		// A pattern must not let one tenant's keys be taken for another's.
		if problem := patternProblem(req.TenantIDFormat, p); problem != "" {
			problems = append(problems, sdk.FieldError{Field: field, Problem: problem})
		}
		if problem := rangeProblem(p); problem != "" {
			problems = append(problems, sdk.FieldError{Field: field, Problem: problem})
		}
	}
	if cfg.DB < 0 || cfg.DB > 1000 {
		problems = append(problems, sdk.FieldError{Field: "db", Problem: "must be between 0 and 1000"})
	}
	if cfg.ScanCount < 1 || cfg.ScanCount > 100000 {
		problems = append(problems, sdk.FieldError{Field: "scan_count", Problem: "must be between 1 and 100000"})
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 10000 {
		problems = append(problems, sdk.FieldError{Field: "batch_size", Problem: "must be between 1 and 10000"})
	}
	if cfg.Workers < 1 || cfg.Workers > 64 {
		problems = append(problems, sdk.FieldError{Field: "workers", Problem: "must be between 1 and 64"})
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	opts := &redis.Options{
		Addr: cfg.Addr, Username: cfg.Username, Password: cfg.Password, DB: cfg.DB,
		PoolSize: cfg.Workers + len(cfg.Patterns) + 2, MaxRetries: 2,
		DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
	}
	if cfg.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		// Name the key: the operator fixes addr (or password), not "redis".
		return nil, classify(fmt.Errorf("addr: cannot connect to redis at %s: %w", cfg.Addr, err))
	}
	d.mu.Lock()
	if d.client != nil {
		d.client.Close()
	}
	d.cfg, d.format, d.client = cfg, req.TenantIDFormat, client
	d.mu.Unlock()
	return &sdk.ConfigureResponse{PluginVersion: version}, nil
}

// current returns the config to serve a call for tenant with, after
// checking the tenant id against the daemon's format: a plugin does not
// trust the daemon, and an id in another spelling ("44444444-DDDD-...")
// must not pass for no tenant at all.
func (d *deleter) current(tenant string) (config, *redis.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		return config{}, nil, sdk.Unavailable(errors.New("not configured"))
	}
	if err := sdk.CheckTenantID(d.format, tenant); err != nil {
		return config{}, nil, err
	}
	return d.cfg, d.client, nil
}

// globEscape makes the tenant id match only itself in a SCAN MATCH pattern.
// It walks bytes, not runes: ranging over a string would turn each invalid
// UTF-8 byte into U+FFFD and so match other keys than the id's.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func patternsFor(cfg config, tenant string) []string {
	out := make([]string, len(cfg.Patterns))
	for i, p := range cfg.Patterns {
		out[i] = strings.Replace(p, "{tenant}", globEscape(tenant), 1)
	}
	return out
}

// scanPlan says how to find a tenant's keys with one pass over the keyspace.
// SCAN walks the whole keyspace whatever MATCH says, so with several
// patterns one scan for "*<tenant>*" (every pattern holds the tenant id)
// picks out the candidates, and each key is then matched against the
// configured patterns here, with Redis's own glob rules.
type scanPlan struct {
	match   string   // the MATCH of the one SCAN
	filters []string // patterns a candidate must match; nil when match is exact
}

func planFor(cfg config, tenant string) scanPlan {
	pats := patternsFor(cfg, tenant)
	if len(pats) == 1 {
		return scanPlan{match: pats[0]}
	}
	return scanPlan{match: "*" + globEscape(tenant) + "*", filters: pats}
}

// which returns the index of the first pattern key matches, or -1.
func (p scanPlan) which(key string) int {
	if p.filters == nil {
		return 0
	}
	for i, f := range p.filters {
		if globMatch(f, key) {
			return i
		}
	}
	return -1
}

// classify marks connection failures retryable and everything else permanent.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &ne), errors.Is(err, redis.ErrClosed), strings.Contains(err.Error(), "connection refused"),
		strings.HasPrefix(err.Error(), "LOADING"), strings.HasPrefix(err.Error(), "BUSY"), strings.HasPrefix(err.Error(), "TRYAGAIN"),
		strings.HasPrefix(err.Error(), "CLUSTERDOWN"), strings.Contains(err.Error(), "EOF"):
		return sdk.Retryable(err, 0)
	default:
		return sdk.Permanent(err)
	}
}

// scan streams the keys matching pattern into out until done.
func scan(ctx context.Context, c *redis.Client, pattern string, count int, out chan<- []string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, int64(count)).Result()
		if err != nil {
			return classify(fmt.Errorf("scan %q: %w", pattern, err))
		}
		if len(keys) > 0 {
			select {
			case out <- keys:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

func (d *deleter) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	cfg, c, err := d.current(req.TenantID)
	if err != nil {
		return nil, err
	}
	breakdown, total, err := countKeys(ctx, cfg, c, req.TenantID)
	if err != nil {
		return nil, err
	}
	return &sdk.CountResponse{Count: total, Breakdown: breakdown}, nil
}

// countKeys is Count's work, shared with Plan: the tenant's keys now, per
// configured pattern (a key under the first pattern it matches).
func countKeys(ctx context.Context, cfg config, c *redis.Client, tenant string) (map[string]int64, int64, error) {
	plan := planFor(cfg, tenant)
	// SCAN may return a key more than once (rehashing); count distinct keys.
	seen := map[string]int{}
	keys := make(chan []string, 16)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { defer close(keys); return scan(gctx, c, plan.match, cfg.ScanCount, keys) })
	for batch := range keys {
		for _, k := range batch {
			if i := plan.which(k); i >= 0 {
				seen[k] = i
			}
		}
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	breakdown := map[string]int64{}
	for _, p := range cfg.Patterns {
		breakdown[p] = 0
	}
	for _, i := range seen {
		breakdown[cfg.Patterns[i]]++
	}
	return breakdown, int64(len(seen)), nil
}

// Delete scans the keyspace once (see scanPlan) and UNLINKs the tenant's
// keys in pipelined batches on several connections while the scan goes on.
// The count is the sum of UNLINK replies: keys Redis actually removed, so a
// key removed by someone else meanwhile (or seen twice by SCAN) is not
// counted; the breakdown counts them per pattern, as Count does.
func (d *deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	cfg, c, err := d.current(req.TenantID)
	if err != nil {
		return nil, err
	}
	if err := d.fps.Check(req.PlanFingerprint, planLines(cfg)); err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	var deleted atomic.Int64
	// Removed keys per pattern, for the breakdown: each pattern's keys go
	// in UNLINK commands of their own, whose replies are counted apart.
	perPattern := make([]atomic.Int64, len(cfg.Patterns))
	plan := planFor(cfg, req.TenantID)
	keys := make(chan []string, 64)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { defer close(keys); return scan(gctx, c, plan.match, cfg.ScanCount, keys) })
	for w := 0; w < cfg.Workers; w++ {
		g.Go(func() error {
			pending := make([][]string, len(cfg.Patterns))
			npending := 0
			flush := func() error {
				if npending == 0 {
					return nil
				}
				pipe := c.Pipeline()
				type unlink struct {
					pattern int
					cmd     *redis.IntCmd
				}
				var cmds []unlink
				for i, group := range pending {
					for start := 0; start < len(group); start += unlinkArity {
						end := min(start+unlinkArity, len(group))
						cmds = append(cmds, unlink{i, pipe.Unlink(gctx, group[start:end]...)})
					}
				}
				_, err := pipe.Exec(gctx)
				for _, u := range cmds {
					deleted.Add(u.cmd.Val())
					perPattern[u.pattern].Add(u.cmd.Val())
				}
				for i := range pending {
					pending[i] = pending[i][:0]
				}
				npending = 0
				if err != nil {
					return classify(fmt.Errorf("unlink: %w", err))
				}
				progress(deleted.Load())
				return nil
			}
			for batch := range keys {
				for _, k := range batch {
					if i := plan.which(k); i >= 0 {
						pending[i] = append(pending[i], k)
						npending++
					}
				}
				if npending >= cfg.BatchSize {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return flush()
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, sdk.PartialDeletion(deleted.Load(), err)
	}
	breakdown := make(map[string]int64, len(cfg.Patterns))
	for i, p := range cfg.Patterns {
		breakdown[p] += perPattern[i].Load()
	}
	return &sdk.DeleteResponse{DeletedCount: deleted.Load(), Breakdown: breakdown}, nil
}

// unlinkArity is how many keys one UNLINK command carries: large enough to
// amortise the command's overhead in Redis, small enough that one command
// does not stall the server.
const unlinkArity = 500
