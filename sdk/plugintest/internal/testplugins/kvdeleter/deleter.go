// Package kvdeleter is a TenantDeleter for the kit's test store
// (internal/teststore), written correctly, with switches that make it wrong
// in one way each. The programs next to it serve it with one switch on: the
// kit's own tests run the kit against each and check that it fails them,
// with a message that says what to fix.
package kvdeleter

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/teststore"
)

// Flaws are the ways a deleter can be wrong. The zero value is a correct
// deleter.
type Flaws struct {
	// IgnoreCancel: Delete goes on after its context is cancelled (the
	// store calls use a context that is never cancelled).
	IgnoreCancel bool
	// Match, when set, decides which stored tenants a requested id names
	// (instead of the store's byte-for-byte match): a sloppy comparison.
	Match func(stored, requested string) bool
	// DownIsEmpty: a store that cannot be reached counts as empty.
	DownIsEmpty bool
	// DownIsPermanent: store errors are classed permanent.
	DownIsPermanent bool
	// LazyConfigure: Configure does not check that the store is reachable.
	LazyConfigure bool
	// UnnamedUnreachable: the error of an unreachable store does not say
	// which setting points at it.
	UnnamedUnreachable bool
	// OverCount: a failed batch is counted as deleted.
	OverCount bool
	// PoolOfFour: Delete holds one of four connections for its whole run
	// and takes a second for each batch, as a proof kept in one session's
	// temporary tables does: four Deletes at once hold all four and wait
	// for a second forever.
	PoolOfFour bool
	// FieldlessConfigErrors: config problems are reported under "config".
	FieldlessConfigErrors bool
	// LeakDSN: logs the DSN through a logger of its own on stderr (as a
	// driver with a package-level logger does), bypassing the SDK's scrubbing.
	LeakDSN bool
	// LeakToken: does not register the session token as a secret and puts
	// it in its errors.
	LeakToken bool
	// NoIDCheck: does not check tenant ids (sdk.CheckTenantID), relying on
	// the daemon's.
	NoIDCheck bool
	// PlanFingerprintCounts: the plan's fingerprint hashes the counts too,
	// so it changes with the data and differs between tenants.
	PlanFingerprintCounts bool
	// PlanMiscounts: the plan expects one item fewer than there are (a
	// plan computed apart from Count, off by one).
	PlanMiscounts bool
	// IgnorePlanFingerprint: Delete does not check the plan fingerprint
	// the daemon checked, and deletes whatever the store holds now.
	IgnorePlanFingerprint bool
}

// rawLog writes to the process's stderr as it was at start: go-plugin
// redirects os.Stderr later, but a logger made at init keeps the original,
// like the default logger of many database drivers.
var rawLog = log.New(os.Stderr, "[kvstore] ", 0)

// Deleter deletes a tenant's items from the test store.
type Deleter struct {
	Flaws Flaws

	mu     sync.Mutex
	dsn    teststore.DSN
	batch  int
	format string
	client *teststore.Client
	fps    sdk.Fingerprints
	pool   fourConns
}

type config struct {
	DSN       string `json:"dsn"`
	BatchSize int    `json:"batch_size"`
}

// Configure checks the config and that the store answers.
func (d *Deleter) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{BatchSize: 100}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, d.fields(err)
	}
	var problems []sdk.FieldError
	dsn, err := teststore.ParseDSN(cfg.DSN)
	if err != nil {
		problems = append(problems, sdk.FieldError{Field: "dsn", Problem: err.Error()})
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 10000 {
		problems = append(problems, sdk.FieldError{Field: "batch_size", Problem: "must be between 1 and 10000"})
	}
	if err := sdk.ValidateTenantIDFormat(req.TenantIDFormat); err != nil {
		problems = append(problems, sdk.FieldError{Field: "tenant_id_format", Problem: err.Error()})
	}
	if len(problems) > 0 {
		return nil, d.fields(sdk.InvalidConfig(problems...))
	}
	if d.Flaws.LeakDSN {
		rawLog.Printf("connecting to %s", cfg.DSN)
	}
	d.mu.Lock()
	if d.client != nil {
		d.client.Close()
		d.client = nil
	}
	d.dsn, d.batch, d.format = dsn, cfg.BatchSize, req.TenantIDFormat
	d.mu.Unlock()
	if !d.Flaws.LazyConfigure {
		if _, err := d.conn(ctx); err != nil {
			return nil, err
		}
	}
	return &sdk.ConfigureResponse{PluginVersion: "0.0.1"}, nil
}

// fields moves every field problem under "config" when the flaw says so.
func (d *Deleter) fields(err error) error {
	var e *sdk.Error
	if !d.Flaws.FieldlessConfigErrors || !errors.As(err, &e) {
		return err
	}
	var problems []sdk.FieldError
	for _, f := range e.Fields {
		problems = append(problems, sdk.FieldError{Field: "config", Problem: f.Problem})
	}
	return sdk.InvalidConfig(problems...)
}

// conn returns the open connection or opens one.
func (d *Deleter) conn(ctx context.Context) (*teststore.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client != nil {
		return d.client, nil
	}
	c, err := teststore.Dial(ctx, d.dsn)
	if err != nil {
		var se *teststore.ErrServer
		if errors.As(err, &se) {
			return nil, sdk.Permanent(fmt.Errorf("dsn: the store refused the credentials: %w", err))
		}
		if d.Flaws.UnnamedUnreachable {
			return nil, sdk.Unavailable(err)
		}
		return nil, d.class(fmt.Errorf("dsn: cannot reach the store at %s: %w", d.dsn.Addr, err))
	}
	if !d.Flaws.LeakToken {
		sdk.AddSecret(c.Token)
	}
	d.client = c
	return c, nil
}

// fail classes a store error and drops the connection, so that the next
// call reconnects.
func (d *Deleter) fail(c *teststore.Client, err error) error {
	d.mu.Lock()
	if d.client == c {
		d.client = nil
	}
	d.mu.Unlock()
	c.Close()
	if d.Flaws.LeakToken {
		err = fmt.Errorf("session %s: %w", c.Token, err)
	}
	return d.class(err)
}

func (d *Deleter) class(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if d.Flaws.DownIsPermanent {
		return sdk.Permanent(err)
	}
	return sdk.Retryable(err, 0)
}

func (d *Deleter) storeCtx(ctx context.Context) context.Context {
	if d.Flaws.IgnoreCancel {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// tenants are the stored tenants the requested id names: itself, or what a
// sloppy Match takes for it.
func (d *Deleter) tenants(ctx context.Context, c *teststore.Client, id string) ([]string, error) {
	if d.Flaws.Match == nil {
		return []string{id}, nil
	}
	all, err := c.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range all {
		if d.Flaws.Match(t, id) {
			out = append(out, t)
		}
	}
	return out, nil
}

// checkID is sdk.CheckTenantID, unless the flaw skips it.
func (d *Deleter) checkID(id string) error {
	if d.Flaws.NoIDCheck {
		return nil
	}
	return sdk.CheckTenantID(d.format, id)
}

// Count counts the tenant's items.
func (d *Deleter) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	if err := d.checkID(req.TenantID); err != nil {
		return nil, err
	}
	total, err := d.count(ctx, req.TenantID)
	if err != nil {
		if d.Flaws.DownIsEmpty {
			return &sdk.CountResponse{Count: 0, Breakdown: map[string]int64{"items": 0}}, nil
		}
		return nil, err
	}
	return &sdk.CountResponse{Count: total, Breakdown: map[string]int64{"items": total}}, nil
}

func (d *Deleter) count(ctx context.Context, id string) (int64, error) {
	c, err := d.conn(ctx)
	if err != nil {
		return 0, err
	}
	names, err := d.tenants(ctx, c, id)
	if err != nil {
		return 0, d.fail(c, err)
	}
	var total int64
	for _, name := range names {
		n, err := c.Count(ctx, name)
		if err != nil {
			return 0, d.fail(c, err)
		}
		total += n
	}
	return total, nil
}

// Delete deletes the tenant's items in batches.
func (d *Deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	if err := d.checkID(req.TenantID); err != nil {
		return nil, err
	}
	if err := d.checkPlan(ctx, req); err != nil {
		return nil, sdk.PartialDeletion(0, err)
	}
	sctx := d.storeCtx(ctx)
	c, err := d.conn(sctx)
	if err != nil {
		if d.Flaws.DownIsEmpty {
			return &sdk.DeleteResponse{DeletedCount: 0, Breakdown: map[string]int64{"items": 0}}, nil
		}
		return nil, sdk.PartialDeletion(0, err)
	}
	names, err := d.tenants(sctx, c, req.TenantID)
	if err != nil {
		return nil, sdk.PartialDeletion(0, d.fail(c, err))
	}
	var deleted int64
	if d.Flaws.PoolOfFour {
		if err := d.pool.take(ctx); err != nil {
			return nil, sdk.PartialDeletion(0, err)
		}
		defer d.pool.give()
	}
	for _, name := range names {
		for {
			if d.Flaws.PoolOfFour {
				if err := d.pool.take(ctx); err != nil {
					return nil, sdk.PartialDeletion(deleted, sdk.Retryable(err, 0))
				}
				d.pool.give() // the batch's connection, at once: enough to wait for it
			}
			if !d.Flaws.IgnoreCancel {
				if err := ctx.Err(); err != nil {
					return nil, sdk.PartialDeletion(deleted, err)
				}
			}
			n, err := c.Delete(sctx, name, d.batch)
			if err != nil && d.Flaws.DownIsEmpty {
				return &sdk.DeleteResponse{DeletedCount: deleted, Breakdown: map[string]int64{"items": deleted}}, nil
			}
			if err != nil {
				if d.Flaws.OverCount {
					deleted += int64(d.batch)
				}
				return nil, sdk.PartialDeletion(deleted, d.fail(c, err))
			}
			if n == 0 {
				break
			}
			deleted += n
			progress(deleted)
		}
	}
	return &sdk.DeleteResponse{DeletedCount: deleted, Breakdown: map[string]int64{"items": deleted}}, nil
}

// Numeric is a Match that compares ids as numbers when both are numbers,
// as a numeric key column or attribute does.
func Numeric(stored, requested string) bool {
	a, errA := strconv.ParseFloat(strings.TrimSpace(stored), 64)
	b, errB := strconv.ParseFloat(strings.TrimSpace(requested), 64)
	if errA == nil && errB == nil {
		return a == b
	}
	return stored == requested
}

// fourConns is a pool of four connections (PoolOfFour).
type fourConns struct {
	once  sync.Once
	slots chan struct{}
}

func (p *fourConns) take(ctx context.Context) error {
	p.once.Do(func() { p.slots = make(chan struct{}, 4) })
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *fourConns) give() { <-p.slots }
