package main

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.0.0"

// config is the [dlq_source.config] table (docs/plugins.md).
type config struct {
	DSN            string `json:"dsn"`
	Table          string `json:"table"`
	IDColumn       string `json:"id_column"`
	PayloadColumn  string `json:"payload_column"`
	ErrorColumn    string `json:"error_column"`
	ClassColumn    string `json:"class_column"`
	FailedAtColumn string `json:"failed_at_column"`
	AttemptsColumn string `json:"attempts_column"`
	// Where is an SQL condition on the table's rows (the operator's, as
	// the rest of the config): only rows it holds for are dead letters.
	Where string `json:"where"`
	// RetryURL is the reprocess endpoint, {column} replaced by the row's
	// value, path-escaped; RetryTable a queue table to insert the payload
	// into instead (RetryPayloadColumn).
	RetryURL           string `json:"retry_url"`
	RetryTable         string `json:"retry_table"`
	RetryPayloadColumn string `json:"retry_payload_column"`
	// OnResolved: "mark" (the state table, and ResolvedColumn when set) or
	// "delete" (the row).
	OnResolved     string `json:"on_resolved"`
	ResolvedColumn string `json:"resolved_column"`
	// StateTable is where the plugin records the rows taken in and
	// resolved, created when missing.
	StateTable   string `json:"state_table"`
	PollInterval string `json:"poll_interval"`
	HTTPTimeout  string `json:"http_timeout"`
}

var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func (s *source) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{Table: "failed_jobs", IDColumn: "id", PayloadColumn: "payload", ErrorColumn: "error_message",
		ClassColumn: "job_type", FailedAtColumn: "failed_at", RetryPayloadColumn: "payload", OnResolved: "mark",
		StateTable: "lifecycled_dlq_rows", PollInterval: "1s", HTTPTimeout: "30s"}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	bad := func(field, problem string) {
		problems = append(problems, sdk.FieldError{Field: field, Problem: problem})
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if cfg.DSN == "" || err != nil {
		bad("dsn", `must be a PostgreSQL connection string, e.g. "postgres://lifecycled@db/app"`)
	}
	for field, v := range map[string]string{"table": cfg.Table, "id_column": cfg.IDColumn, "payload_column": cfg.PayloadColumn,
		"failed_at_column": cfg.FailedAtColumn, "state_table": cfg.StateTable} {
		if v == "" {
			bad(field, "must not be empty")
		}
	}
	switch {
	case (cfg.RetryURL == "") == (cfg.RetryTable == ""):
		bad("retry_url", "give retry_url (an HTTP reprocess endpoint) or retry_table (a queue table), one of them")
	case cfg.RetryURL != "":
		u, err := url.Parse(placeholder.ReplaceAllString(cfg.RetryURL, "x"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("retry_url", "must be an http:// or https:// URL, {column} standing for a value of the row")
		}
	}
	if cfg.OnResolved != "mark" && cfg.OnResolved != "delete" {
		bad("on_resolved", `must be "mark" or "delete"`)
	}
	poll, err := time.ParseDuration(cfg.PollInterval)
	if err != nil || poll < 10*time.Millisecond || poll > time.Minute {
		bad("poll_interval", "must be a duration between 10ms and 1m")
	}
	timeout, err := time.ParseDuration(cfg.HTTPTimeout)
	if err != nil || timeout < time.Second || timeout > 10*time.Minute {
		bad("http_timeout", "must be a duration between 1s and 10m")
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, sdk.Retryable(fmt.Errorf("dsn: %w", err), time.Second)
	}
	q := newQueries(cfg)
	if err := q.check(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s.reconfigure(cfg, q, pool, poll, timeout)
	// A row has one id for good, and is taken (acknowledged) on its own;
	// its columns come back in one order.
	return &sdk.ConfigureResponse{PluginVersion: version, Source: sdk.SourceTraits{
		Acks: sdk.AcksPerMessage, Positions: sdk.PositionsStable, HeaderOrderKept: true}}, nil
}

// ident quotes a possibly schema-qualified name ("app.failed_jobs").
func ident(name string) string {
	return pgx.Identifier(strings.Split(name, ".")).Sanitize()
}
