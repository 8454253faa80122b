package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lifecycled/lifecycled/sdk"
)

// Plan describes the table again and refuses, before counting, a table
// whose key no longer is what Configure saw: with another hash key the
// Query would find nothing (an erasure that "succeeds" deleting nothing),
// with another sort key Delete could not name the items. The one step is
// the Query on the hash key with Count's exact count; the notes name every
// secondary index considered; the fingerprint covers where the table is,
// its name, key schema and indexes (lines).
func (d *deleter) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	s, err := d.current()
	if err != nil {
		return nil, err
	}
	tv, err := s.tenantValue(req.TenantID)
	if err != nil {
		return nil, err
	}
	sch, err := s.describe(ctx)
	if err != nil {
		return nil, err
	}
	total, err := s.countItems(ctx, tv)
	if err != nil {
		return nil, err
	}
	via := fmt.Sprintf("Query on hash key %s (%s)", sch.hash.name, sch.hash.typ)
	if sch.sort.name != "" {
		via += fmt.Sprintf(", items named by %s and sort key %s (%s)", sch.hash.name, sch.sort.name, sch.sort.typ)
	}
	return &sdk.PlanResponse{
		Steps:       []sdk.PlanStep{{Target: s.cfg.Table, Via: via, Expected: total}},
		Fingerprint: d.fps.Of(sch.lines(s.cfg)),
		Notes:       sch.notes(s.cfg.PartitionKey),
	}, nil
}

// describe reads the table's key schema and indexes, and fails closed
// when its key is no longer what Configure saw (checkKeys).
func (s snapshot) describe(ctx context.Context) (tableSchema, error) {
	desc, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.cfg.Table)})
	if err != nil {
		return tableSchema{}, classify(fmt.Errorf("describe table %s: %w", s.cfg.Table, err))
	}
	sch := schemaOf(desc.Table)
	if err := s.checkKeys(sch); err != nil {
		return tableSchema{}, err
	}
	return sch, nil
}

// checkKeys fails closed when the table's key changed since Configure.
func (s snapshot) checkKeys(sch tableSchema) error {
	var problem string
	switch {
	case sch.hash.name != s.cfg.PartitionKey:
		problem = fmt.Sprintf("table %s is now keyed by %q, not %q: the tenant's items can no longer be found by partition_key", s.cfg.Table, sch.hash.name, s.cfg.PartitionKey)
	case sch.hash.typ != string(s.pkType):
		problem = fmt.Sprintf("the type of partition key %s of table %s is now %s, was %s", sch.hash.name, s.cfg.Table, sch.hash.typ, s.pkType)
	case sch.sort.name != s.sortKey:
		problem = fmt.Sprintf("the sort key of table %s is now %q, was %q", s.cfg.Table, sch.sort.name, s.sortKey)
	default:
		return nil
	}
	err := sdk.InvalidConfig(sdk.FieldError{Field: "partition_key", Problem: problem + "; reconfigure the deleter"})
	return sdk.Permanent(fmt.Errorf("the table changed since the deleter was configured: %w", err))
}

type keyAttr struct{ name, typ string }

type tableIndex struct {
	kind, name string // kind GSI or LSI
	hash, sort keyAttr
	projection string
}

type tableSchema struct {
	arn        string
	hash, sort keyAttr
	indexes    []tableIndex
}

func schemaOf(t *types.TableDescription) tableSchema {
	attrTypes := map[string]string{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	keys := func(ks []types.KeySchemaElement) (hash, rng keyAttr) {
		for _, k := range ks {
			a := keyAttr{name: aws.ToString(k.AttributeName), typ: attrTypes[aws.ToString(k.AttributeName)]}
			if k.KeyType == types.KeyTypeHash {
				hash = a
			} else {
				rng = a
			}
		}
		return
	}
	projection := func(p *types.Projection) string {
		if p == nil {
			return ""
		}
		nk := append([]string(nil), p.NonKeyAttributes...)
		sort.Strings(nk)
		return fmt.Sprintf("%s %q", p.ProjectionType, nk)
	}
	s := tableSchema{arn: aws.ToString(t.TableArn)}
	s.hash, s.sort = keys(t.KeySchema)
	for _, g := range t.GlobalSecondaryIndexes {
		ix := tableIndex{kind: "GSI", name: aws.ToString(g.IndexName), projection: projection(g.Projection)}
		ix.hash, ix.sort = keys(g.KeySchema)
		s.indexes = append(s.indexes, ix)
	}
	for _, l := range t.LocalSecondaryIndexes {
		ix := tableIndex{kind: "LSI", name: aws.ToString(l.IndexName), projection: projection(l.Projection)}
		ix.hash, ix.sort = keys(l.KeySchema)
		s.indexes = append(s.indexes, ix)
	}
	sort.Slice(s.indexes, func(i, j int) bool {
		if s.indexes[i].kind != s.indexes[j].kind {
			return s.indexes[i].kind < s.indexes[j].kind
		}
		return s.indexes[i].name < s.indexes[j].name
	})
	return s
}

// lines are the facts the plan is computed from, for sdk.Fingerprints:
// where the table is (the endpoint, "" for AWS's own, the region and the
// table's ARN, which names the account: an approved plan is for this
// table, not one of the same name and schema elsewhere), its name, key
// schema and indexes (with their projections): what finds and names the
// tenant's items. Capacity, billing mode, concurrency, rate limits and
// credentials are left out.
func (s tableSchema) lines(cfg config) []string {
	out := []string{"lifecycled dynamodb plan 2",
		fmt.Sprintf("store endpoint %q region %q arn %q", cfg.Endpoint, cfg.Region, s.arn),
		fmt.Sprintf("table %q", cfg.Table),
		fmt.Sprintf("hash %q %s", s.hash.name, s.hash.typ),
		fmt.Sprintf("sort %q %s", s.sort.name, s.sort.typ)}
	for _, ix := range s.indexes {
		out = append(out, fmt.Sprintf("%s %q hash %q %s sort %q %s projection %s", ix.kind, ix.name, ix.hash.name, ix.hash.typ, ix.sort.name, ix.sort.typ, ix.projection))
	}
	return out
}

// notes names each secondary index and why it needs no step of its own:
// DynamoDB keeps indexes in step with the table, so deleting an item
// through the table's key removes its index entries.
func (s tableSchema) notes(partitionKey string) []string {
	if len(s.indexes) == 0 {
		return []string{"no secondary indexes"}
	}
	var out []string
	for _, ix := range s.indexes {
		key := ix.hash.name
		if ix.sort.name != "" {
			key += ", " + ix.sort.name
		}
		var how string
		switch {
		case ix.kind == "LSI":
			how = "shares the table's hash key; its entries go with the table's items"
		case ix.hash.name == partitionKey:
			how = "keyed by the tenant too; not queried: its entries go with the table's items"
		default:
			how = "not keyed by the tenant, not queried: its entries go with the table's items"
		}
		out = append(out, fmt.Sprintf("%s %s (%s): %s", ix.kind, ix.name, key, how))
	}
	return out
}
