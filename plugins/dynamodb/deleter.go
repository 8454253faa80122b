package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/lifecycled/lifecycled/sdk"
)

const version = "1.0.0"

// The UnprocessedItems schedule of seed 000: at most 5 retries, 100 ms
// doubling, capped at 5 s, no jitter (one client deleting one tenant).
const (
	maxRetries     = 5
	initialBackoff = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
	batchLimit     = 25 // BatchWriteItem's limit
)

// computeBackoff is the wait before retry number retry (0-based).
func computeBackoff(retry int) time.Duration {
	return sdk.Backoff(retry, initialBackoff, 2, maxBackoff)
}

type config struct {
	Table             string  `json:"table"`
	PartitionKey      string  `json:"partition_key"`
	Region            string  `json:"region"`
	Endpoint          string  `json:"endpoint"`
	AccessKeyID       string  `json:"access_key_id"`
	SecretAccessKey   string  `json:"secret_access_key"`
	SessionToken      string  `json:"session_token"`
	Concurrency       int     `json:"concurrency"`
	MaxItemsPerSecond float64 `json:"max_items_per_second"`
}

type deleter struct {
	mu      sync.Mutex
	client  *dynamodb.Client
	cfg     config
	format  string // the daemon's tenant_id_format
	sortKey string
	pkType  types.ScalarAttributeType
	limiter *rate.Limiter
	sleep   func(ctx context.Context, d time.Duration) error
	// fps computes plan fingerprints; Delete checks the daemon's against
	// the table it is about to delete from.
	fps sdk.Fingerprints
}

func newDeleter() *deleter {
	return &deleter{sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *deleter) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	cfg := config{Concurrency: 4}
	if err := sdk.DecodeConfig(req.Config, &cfg); err != nil {
		return nil, err
	}
	if err := sdk.ValidateTenantIDFormat(req.TenantIDFormat); err != nil {
		return nil, err
	}
	var problems []sdk.FieldError
	if cfg.Table == "" {
		problems = append(problems, sdk.FieldError{Field: "table", Problem: "required"})
	}
	if cfg.PartitionKey == "" {
		problems = append(problems, sdk.FieldError{Field: "partition_key", Problem: "required: the attribute holding the tenant id"})
	}
	if cfg.Region == "" {
		problems = append(problems, sdk.FieldError{Field: "region", Problem: "required, e.g. us-east-1"})
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		problems = append(problems, sdk.FieldError{Field: "access_key_id", Problem: "access_key_id and secret_access_key (or their _file forms) go together"})
	}
	if cfg.Concurrency < 1 || cfg.Concurrency > 64 {
		problems = append(problems, sdk.FieldError{Field: "concurrency", Problem: "must be between 1 and 64"})
	}
	if cfg.MaxItemsPerSecond < 0 {
		problems = append(problems, sdk.FieldError{Field: "max_items_per_second", Problem: "must not be negative"})
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(cfg.Region)}
	if cfg.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, sdk.Permanent(fmt.Errorf("load AWS config: %w", err))
	}
	client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.Table)})
	if err != nil {
		// Name the key the operator fixes: where DynamoDB is, when it did
		// not answer at all; the table when it answered.
		where := "table"
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) {
			where = "region"
			if cfg.Endpoint != "" {
				where = "endpoint"
			}
		}
		return nil, classify(fmt.Errorf("%s: describe table %s: %w", where, cfg.Table, err))
	}
	var hashKey, sortKey string
	for _, k := range desc.Table.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			hashKey = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			sortKey = aws.ToString(k.AttributeName)
		}
	}
	if hashKey != cfg.PartitionKey {
		return nil, sdk.InvalidConfig(sdk.FieldError{Field: "partition_key", Problem: fmt.Sprintf(
			"table %s is keyed by %q, not %q: the deleter needs the tenant id as the partition key", cfg.Table, hashKey, cfg.PartitionKey)})
	}
	var pkType types.ScalarAttributeType
	for _, a := range desc.Table.AttributeDefinitions {
		if aws.ToString(a.AttributeName) == hashKey {
			pkType = a.AttributeType
		}
	}
	var limiter *rate.Limiter
	if cfg.MaxItemsPerSecond > 0 {
		limiter = rate.NewLimiter(rate.Limit(cfg.MaxItemsPerSecond), max(batchLimit, int(cfg.MaxItemsPerSecond)))
	}
	d.mu.Lock()
	d.client, d.cfg, d.format, d.sortKey, d.pkType, d.limiter = client, cfg, req.TenantIDFormat, sortKey, pkType, limiter
	d.mu.Unlock()
	return &sdk.ConfigureResponse{PluginVersion: version}, nil
}

type snapshot struct {
	client  *dynamodb.Client
	cfg     config
	format  string
	sortKey string
	pkType  types.ScalarAttributeType
	limiter *rate.Limiter
}

func (d *deleter) current() (snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		return snapshot{}, sdk.Unavailable(errors.New("not configured"))
	}
	return snapshot{d.client, d.cfg, d.format, d.sortKey, d.pkType, d.limiter}, nil
}

// tenantValue is the partition key value for a tenant id, typed as the
// table declares it. The id must match the daemon's format (a plugin does
// not trust the daemon), and for a numeric key be the canonical text of a
// number: DynamoDB compares numbers by value, so "1e3", "01000" or
// "1000.0" would name tenant 1000.
func (s snapshot) tenantValue(tenant string) (types.AttributeValue, error) {
	if err := sdk.CheckTenantID(s.format, tenant); err != nil {
		return nil, err
	}
	switch s.pkType {
	case types.ScalarAttributeTypeN:
		if problem := numberProblem(tenant); problem != "" {
			return nil, sdk.InvalidArgument("tenant id %q is not the canonical text of a number (%s), but partition key %s is numeric: "+
				"DynamoDB would take it for another tenant's id; send the number as DynamoDB writes it (\"1000\", not \"1e3\" or \"01000\")",
				tenant, problem, s.cfg.PartitionKey)
		}
		return &types.AttributeValueMemberN{Value: tenant}, nil
	case types.ScalarAttributeTypeB:
		return &types.AttributeValueMemberB{Value: []byte(tenant)}, nil
	default:
		return &types.AttributeValueMemberS{Value: tenant}, nil
	}
}

func (s snapshot) query(tenant types.AttributeValue) *dynamodb.QueryInput {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :tenant"),
		ExpressionAttributeNames:  map[string]string{"#pk": s.cfg.PartitionKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":tenant": tenant},
	}
	return in
}

// classify marks throttling, server faults and network errors retryable;
// validation, missing tables and credentials errors permanent.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"InternalServerError", "ServiceUnavailable", "LimitExceededException", "TransactionConflictException":
			return sdk.Retryable(err, 0)
		case "ResourceNotFoundException":
			return sdk.NotFound(err)
		case "ValidationException":
			return sdk.Invalid(err)
		}
		if apiErr.ErrorFault() == smithy.FaultServer {
			return sdk.Retryable(err, 0)
		}
		return sdk.Permanent(err)
	}
	// Network errors, timeouts and anything unknown may pass.
	return sdk.Retryable(err, 0)
}

// Count pages through Query with Select=COUNT and a consistent read, so a
// count right after a delete sees the delete.
func (d *deleter) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	s, err := d.current()
	if err != nil {
		return nil, err
	}
	tv, err := s.tenantValue(req.TenantID)
	if err != nil {
		return nil, err
	}
	total, err := s.countItems(ctx, tv)
	if err != nil {
		return nil, err
	}
	return &sdk.CountResponse{Count: total, Breakdown: map[string]int64{s.cfg.Table: total}}, nil
}

// countItems is Count's work, shared with Plan.
func (s snapshot) countItems(ctx context.Context, tv types.AttributeValue) (int64, error) {
	in := s.query(tv)
	in.Select = types.SelectCount
	in.ConsistentRead = aws.Bool(true)
	var total int64
	p := dynamodb.NewQueryPaginator(s.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, classify(fmt.Errorf("count: %w", err))
		}
		total += int64(out.Count)
	}
	return total, nil
}

// Delete pages through the tenant's keys (projection of the key attributes
// only) and deletes them with BatchWriteItem, 25 at a time, on `concurrency`
// workers. The count is exact: requested minus what stayed unprocessed.
func (d *deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	s, err := d.current()
	if err != nil {
		return nil, err
	}
	tv, err := s.tenantValue(req.TenantID)
	if err != nil {
		return nil, err
	}
	// The daemon checked the plan before this call: the table (its key,
	// its indexes, where it is) must still be the one it checked. Without
	// a fingerprint (an older daemon) the table is not described again.
	if req.PlanFingerprint != "" {
		sch, err := s.describe(ctx)
		if err != nil {
			return nil, sdk.PartialDeletion(0, err)
		}
		if err := d.fps.Check(req.PlanFingerprint, sch.lines(s.cfg)); err != nil {
			return nil, sdk.PartialDeletion(0, err)
		}
	}
	in := s.query(tv)
	in.ProjectionExpression = aws.String("#pk")
	if s.sortKey != "" {
		in.ProjectionExpression = aws.String("#pk, #sk")
		in.ExpressionAttributeNames["#sk"] = s.sortKey
	}

	var deleted atomic.Int64
	chunks := make(chan []types.WriteRequest, s.cfg.Concurrency*2)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(chunks)
		p := dynamodb.NewQueryPaginator(s.client, in)
		var chunk []types.WriteRequest
		send := func() error {
			select {
			case chunks <- chunk:
				chunk = nil
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		for p.HasMorePages() {
			out, err := p.NextPage(gctx)
			if err != nil {
				return classify(fmt.Errorf("query keys: %w", err))
			}
			for _, item := range out.Items {
				chunk = append(chunk, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: item}})
				if len(chunk) == batchLimit {
					if err := send(); err != nil {
						return err
					}
				}
			}
		}
		if len(chunk) > 0 {
			return send()
		}
		return nil
	})
	for w := 0; w < s.cfg.Concurrency; w++ {
		g.Go(func() error {
			for chunk := range chunks {
				n, err := d.batchDelete(gctx, s, chunk)
				deleted.Add(n)
				if err != nil {
					return err
				}
				progress(deleted.Load())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		for range chunks {
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, sdk.PartialDeletion(deleted.Load(), err)
	}
	return &sdk.DeleteResponse{DeletedCount: deleted.Load(), Breakdown: map[string]int64{s.cfg.Table: deleted.Load()}}, nil
}

// batchDelete writes one chunk and retries its UnprocessedItems on seed
// 000's schedule. It returns how many of the chunk's items were deleted.
func (d *deleter) batchDelete(ctx context.Context, s snapshot, reqs []types.WriteRequest) (int64, error) {
	requested := int64(len(reqs))
	remaining := reqs
	for retry := 0; retry <= maxRetries; retry++ {
		if retry > 0 {
			wait := computeBackoff(retry - 1)
			sdk.Logger().Warn("retrying unprocessed items", "table", s.cfg.Table, "retry", retry, "unprocessed", len(remaining), "backoff", wait.String())
			if err := d.sleep(ctx, wait); err != nil {
				return requested - int64(len(remaining)), err
			}
		}
		if s.limiter != nil {
			if err := s.limiter.WaitN(ctx, len(remaining)); err != nil {
				return requested - int64(len(remaining)), err
			}
		}
		out, err := s.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{s.cfg.Table: remaining},
		})
		if err != nil {
			return requested - int64(len(remaining)), classify(fmt.Errorf("batch write: %w", err))
		}
		unprocessed := out.UnprocessedItems[s.cfg.Table]
		if len(unprocessed) == 0 {
			return requested, nil
		}
		if retry == maxRetries {
			sdk.Logger().Error("unprocessed items remain after the last retry", "table", s.cfg.Table, "unprocessed", len(unprocessed))
			return requested - int64(len(unprocessed)), sdk.Retryable(fmt.Errorf(
				"%d items remain unprocessed in %s after %d retries (the table is throttling; the job retries later)",
				len(unprocessed), s.cfg.Table, maxRetries), maxBackoff)
		}
		remaining = unprocessed
	}
	return requested - int64(len(remaining)), nil
}
