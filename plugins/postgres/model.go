package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// model is how one configuration erases a tenant from one database: the
// tables it deletes from (the "set"), how each row is known to be the
// tenant's (its tenant column, or a foreign key path to a row that is), the
// order that cannot violate a key, and every key through which deleting
// could reach rows outside the set.
type model struct {
	tables  []*logicalTable // the set, in delete order
	targets []*logicalTable // tables outside the set that this tenant's cascades reach
	steps   []step
	// inbound are the keys that reference a table the deletion removes rows
	// from (the set and the cascade targets), from anywhere.
	inbound []*keyEdge
	// dropped are keys within the set whose order was given up to break a
	// cycle (ON DELETE CASCADE or SET NULL/DEFAULT): their action runs on
	// this tenant's own rows.
	dropped []*keyEdge
	byRoot  map[uint32]*logicalTable
	names   []string // breakdown keys, set first then targets
	// ignored are the tables of ignore_tables, by root oid.
	ignored map[uint32]*catRel
	// ignoredViews are the materialized views ignore_tables names.
	ignoredViews []string
	// store names the database (storeIdentity).
	store string
	// cat is the catalog the model was built from.
	cat *catalog
	// settings are the session settings the deleter found before pinning
	// them (sessionGuard), for the plan and its fingerprint.
	settings map[string]string
	// globalRows: rows with a NULL tenant column are shared data.
	globalRows bool
}

// logicalTable is one logical table (a plain table or the root of a partition or
// inheritance tree).
type logicalTable struct {
	rel    *catRel
	leaves []*catRel // where its rows are stored
	// tenant is the tenant column; nil for a table whose rows belong to a
	// tenant through owners.
	tenant *catColumn
	owners []*keyEdge // keys to tables of the set (dependent tables only)
	self   []*keyEdge // keys to itself: deleted leaves of the tree first
	listed bool       // in the set (else a cascade target)
	// cascadeFrom: for a cascade target, the keys whose cascade reaches it.
	cascadeFrom []*keyEdge
	// cascades are the tables a batch of this one can remove rows of by
	// cascade, counted per batch from the transaction's statistics.
	cascades []*logicalTable
	pos      int // configured position (explicit list), for tie breaks
	// whole: the tenant's rows are deleted in one statement, not in
	// batches (see cascadeRegions).
	whole bool
}

func (t *logicalTable) name() string { return t.rel.qualified() }

// keyEdge is a foreign key, declared on child, referencing parent.
type keyEdge struct {
	fk              catFK
	child, parent   *catRel       // the relations it is declared on
	childT, parentT *logicalTable // nil outside the set and targets
	// childTree: the relations whose rows the key covers (child and, for
	// a partitioned table, its partitions).
	childTree []uint32
}

func (e *keyEdge) describe() string {
	return fmt.Sprintf("%s on %s (%s) references %s", e.fk.name, e.child.qualified(), strings.Join(e.fk.fkCols, ", "), e.parent.qualified())
}

// step is one table, or a cycle of tables whose keys are all DEFERRABLE
// and are deleted in one transaction with the keys deferred.
type step struct {
	tables []*logicalTable
}

// tenantColumnFor is the tenant column of a table under cfg.
func (cfg config) tenantColumnFor(r *catRel) string { return cfg.tenantColumnOf(r.schema, r.name) }

// tenantColumnOf is the tenant column of the relation schema.name (a table
// or a materialized view) under cfg.
func (cfg config) tenantColumnOf(schema, name string) string {
	if c, ok := cfg.TenantColumns[schema+"."+name]; ok {
		return c
	}
	// A bare key names a table in public; a key with a dot is always
	// "schema.table" (a public table literally named "crm.accounts" is not
	// the table crm.accounts).
	if schema == "public" && !strings.Contains(name, ".") {
		if c, ok := cfg.TenantColumns[name]; ok {
			return c
		}
	}
	return cfg.TenantColumn
}

// buildModel checks the configuration against the catalogue and derives
// the deletion model. Every problem is a config error naming the table.
func buildModel(cfg config, cat *catalog) (*model, error) {
	m := &model{byRoot: map[uint32]*logicalTable{}, store: cat.store, cat: cat, globalRows: cfg.KeepsGlobalRows()}
	ignored, problems := resolveIgnored(cfg, cat)
	m.ignored = ignored
	add := func(r *catRel, pos int) *logicalTable {
		t := &logicalTable{rel: r, listed: true, pos: pos}
		if col, ok := r.cols[cfg.tenantColumnFor(r)]; ok {
			t.tenant = &col
		}
		m.byRoot[r.oid] = t
		m.tables = append(m.tables, t)
		return t
	}
	if cfg.Discover {
		schemas := cfg.SchemaSet()
		var cands []*catRel
		for _, r := range cat.rels {
			if schemas[r.schema] && len(r.parents) == 0 && r.kind != 'f' && ignored[r.oid] == nil {
				cands = append(cands, r)
			}
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].qualified() < cands[j].qualified() })
		for _, r := range cands {
			if _, ok := r.cols[cfg.tenantColumnFor(r)]; ok {
				add(r, len(m.tables))
			}
		}
		if len(m.tables) == 0 {
			return nil, sdk.InvalidConfig(sdk.FieldError{Field: "discover", Problem: fmt.Sprintf("no table in schemas %v has a column %q", cfg.Schemas, cfg.TenantColumn)})
		}
		// Tables without the column whose rows hang off the set's rows by
		// foreign key are the tenant's data too.
		for grew := true; grew; {
			grew = false
			for _, r := range cands {
				if m.byRoot[r.oid] != nil {
					continue
				}
				for _, f := range cat.fks {
					p := cat.root(f.parent)
					if cat.root(f.child) == r.oid && p != r.oid && m.byRoot[p] != nil {
						add(r, len(m.tables))
						grew = true
						break
					}
				}
			}
		}
	} else {
		seen := map[uint32]bool{}
		for i, name := range cfg.Tables {
			field := fmt.Sprintf("tables[%d]", i)
			r, err := cat.lookup(name)
			switch {
			case err != nil:
				problems = append(problems, sdk.FieldError{Field: field, Problem: err.Error()})
				continue
			case len(r.parents) > 0:
				kind := "an inheritance child"
				if r.partition {
					kind = "a partition"
				}
				problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is %s of %s: list %s (its partitions are deleted with it)",
					r.qualified(), kind, cat.rels[cat.root(r.oid)].qualified(), cat.rels[cat.root(r.oid)].qualified())})
				continue
			case r.kind == 'f':
				problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is a foreign table: delete in the server that holds it", r.qualified())})
				continue
			case seen[r.oid]:
				problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is listed twice", r.qualified())})
				continue
			case ignored[r.oid] != nil:
				problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is in both tables and ignore_tables", r.qualified())})
				continue
			}
			seen[r.oid] = true
			add(r, i)
		}
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}

	for _, t := range m.tables {
		for _, oid := range cat.tree(t.rel.oid) {
			leaf := cat.rels[oid]
			if leaf.hiddenRows {
				problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf(
					"%s has row-level security, so the deleter's role may not see every row and could call an erasure complete while rows remain: "+
						"connect as the table owner or a role with BYPASSRLS", leaf.qualified())})
			}
			switch leaf.kind {
			case 'r':
				t.leaves = append(t.leaves, leaf)
			case 'f':
				problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf(
					"%s has a foreign-table partition %s, which cannot be deleted from safely here", t.name(), leaf.qualified())})
			}
		}
		if t.tenant != nil {
			if p := columnProblem(*t.tenant); p != "" {
				problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf("%s.%s: %s", t.name(), t.tenant.name, p)})
			}
		}
	}

	// Keys: every key that references a table of the set, and every key
	// of a set table.
	for _, f := range cat.fks {
		cr, pr := cat.root(f.child), cat.root(f.parent)
		ct, pt := m.byRoot[cr], m.byRoot[pr]
		if ct == nil && pt == nil {
			continue
		}
		e := &keyEdge{fk: f, child: cat.rels[f.child], parent: cat.rels[f.parent], childT: ct, parentT: pt, childTree: cat.covered(f.child)}
		switch {
		case ct != nil && ct == pt:
			ct.self = append(ct.self, e)
		case ct != nil && pt != nil && ct.tenant == nil:
			ct.owners = append(ct.owners, e)
		}
		if pt != nil {
			m.inbound = append(m.inbound, e)
		}
	}
	for _, t := range m.tables {
		for _, oid := range cat.tree(t.rel.oid) {
			if r := cat.rels[oid]; len(r.parents) > 1 {
				problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf(
					"%s inherits from more than one table; multiple inheritance is not supported (its rows would count under each parent)", r.qualified())})
			}
		}
	}
	for _, t := range m.tables {
		if t.tenant == nil && len(t.owners) == 0 {
			problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf(
				"%s has no column %q and no foreign key to a listed table, so its rows cannot be told apart by tenant", t.name(), cfg.tenantColumnFor(t.rel))})
		}
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	if err := checkOwnerCycles(m); err != nil {
		return nil, err
	}
	if err := m.addCascadeTargets(cfg, cat); err != nil {
		return nil, err
	}
	if err := m.checkVisibility(cfg, cat); err != nil {
		return nil, err
	}
	if problems := m.checkHooks(cfg); len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	if err := m.order(cfg); err != nil {
		return nil, err
	}
	// Last, so that a problem with the listed tables themselves is reported
	// first: drift names what the list misses.
	if err := m.checkDrift(cfg, cat); err != nil {
		return nil, err
	}
	m.planCascades()
	for _, t := range m.tables {
		m.names = append(m.names, t.name())
	}
	for _, t := range m.targets {
		m.names = append(m.names, t.name())
	}
	return m, nil
}

func fieldOf(cfg config, t *logicalTable) string {
	if cfg.Discover {
		return "discover"
	}
	return fmt.Sprintf("tables[%d]", t.pos)
}

// checkOwnerCycles refuses dependent tables that own each other in a loop:
// their rows would belong to a tenant only through themselves.
func checkOwnerCycles(m *model) error {
	dependent := func(t *logicalTable) bool { return t.tenant == nil }
	return sqldelete.CheckOwnerLoops(m.tables, dependent, (*logicalTable).ownerTables, (*logicalTable).name)
}

// ownerTables are the tables whose rows own t's rows.
func (t *logicalTable) ownerTables() []*logicalTable {
	owners := make([]*logicalTable, len(t.owners))
	for i, e := range t.owners {
		owners[i] = e.parentT
	}
	return owners
}
