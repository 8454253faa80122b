package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// model is how one configuration erases a tenant from one server: the
// tables it deletes from (the "set"), how each row is known to be the
// tenant's (its tenant column, or a foreign key path to a row that is), the
// order that cannot violate a key, and every key through which deleting
// could reach rows outside the set.
//
// Unlike PostgreSQL, MySQL neither defers keys nor reports what a cascade
// deleted, so tables outside the set that ON DELETE CASCADE would reach
// ("targets") are deleted explicitly, child first, before the cascade
// could: their rows are counted exactly, under their own name.
type model struct {
	order   []*logicalTable // set and targets, in delete order (children first)
	tables  []*logicalTable // the set, in configured (or discovered) order
	targets []*logicalTable
	// inbound are the keys that reference a table the deletion removes rows
	// from, from anywhere.
	inbound []*keyEdge
	// dropped are keys within the set whose order was given up to break a
	// cycle (ON DELETE CASCADE, then SET NULL): their action runs on this
	// tenant's own rows.
	dropped []*keyEdge
	byKey   map[tkey]*logicalTable
	names   []string // breakdown keys: the set, then targets
	// store names the server and database (storeIdentity).
	store string
	// cat is the catalogue the model was built from.
	cat *catalog
	// globalRows: rows with a NULL tenant column are shared data.
	globalRows bool
	// bystanders are the tables with the tenant column in the schemas of
	// the set that the erasure does not delete from: a trigger may remove
	// rows of them, which the erasure counts.
	bystanders []*logicalTable
	// stuckLoops are self keys of the set whose loops of this tenant's
	// rows could only be cut through the tenant column (no other column of
	// the key allows NULL): the preflight refuses the tenant if it has
	// rows referencing each other through one.
	stuckLoops []*keyEdge
}

// logicalTable is one table of the set or a target.
type logicalTable struct {
	cat *catTable
	// tenant is the tenant column; nil for a table whose rows belong to a
	// tenant through owners.
	tenant *catColumn
	owners []*keyEdge // keys to tables of the set (dependent tables only)
	self   []*keyEdge // keys to itself: leaves deleted first
	listed bool       // in the set (else a cascade target)
	// cascadeFrom: for a target, the keys whose cascade reaches it.
	cascadeFrom []*keyEdge
	// cascades are the tables a batch of this one can remove rows of by
	// cascade (through a key given up in a cycle, or a self key), counted
	// per batch.
	cascades []*logicalTable
	pos      int // configured position, for tie breaks
}

func (t *logicalTable) name() string { return t.cat.name() }

// keyEdge is a foreign key, declared on child, referencing parent.
type keyEdge struct {
	fk              *catFK
	child, parent   *catTable
	childT, parentT *logicalTable // nil outside the set and targets
}

func (e *keyEdge) describe() string { return e.fk.describe() }

// tenantColumnFor is the tenant column of a table under cfg.
func (cfg config) tenantColumnFor(t *catTable) string {
	if c, ok := cfg.TenantColumns[t.name()]; ok {
		return c
	}
	if t.key[0] == cfg.database && !strings.Contains(t.key[1], ".") {
		if c, ok := cfg.TenantColumns[t.key[1]]; ok {
			return c
		}
	}
	return cfg.TenantColumn
}

func fieldName(cfg config) string {
	if cfg.Discover {
		return "discover"
	}
	return "tables"
}

func fieldOf(cfg config, t *logicalTable) string {
	if cfg.Discover || !t.listed {
		return fieldName(cfg)
	}
	return fmt.Sprintf("tables[%d]", t.pos)
}

// buildModel checks the configuration against the catalogue and derives
// the deletion model. Every problem is a config error naming the table.
func buildModel(cfg config, cat *catalog) (*model, error) {
	m := &model{byKey: map[tkey]*logicalTable{}, store: cat.store, cat: cat, globalRows: cfg.KeepsGlobalRows()}
	var problems []sdk.FieldError
	ignored := map[tkey]bool{}
	for i, name := range cfg.IgnoreTables {
		t, err := cat.lookup(name, cfg.database)
		if err != nil {
			problems = append(problems, sdk.FieldError{Field: fmt.Sprintf("ignore_tables[%d]", i), Problem: err.Error()})
			continue
		}
		ignored[t.key] = true
	}
	add := func(ct *catTable, pos int) *logicalTable {
		t := &logicalTable{cat: ct, listed: true, pos: pos}
		if col, ok := ct.col(cfg.tenantColumnFor(ct)); ok {
			t.tenant = &col
		}
		m.byKey[ct.key] = t
		m.tables = append(m.tables, t)
		return t
	}
	if cfg.Discover {
		schemas := cfg.SchemaSet()
		var cands []*catTable
		for _, t := range cat.tables {
			if schemas[t.key[0]] && !ignored[t.key] {
				cands = append(cands, t)
			}
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].name() < cands[j].name() })
		for _, t := range cands {
			if _, ok := t.col(cfg.tenantColumnFor(t)); ok {
				add(t, len(m.tables))
			}
		}
		if len(m.tables) == 0 {
			return nil, sdk.InvalidConfig(sdk.FieldError{Field: "discover", Problem: fmt.Sprintf("no table in schemas %v has a column %q", cfg.Schemas, cfg.TenantColumn)})
		}
		// Tables without the column whose rows hang off the set's rows by
		// foreign key are the tenant's data too.
		for grew := true; grew; {
			grew = false
			for _, t := range cands {
				if m.byKey[t.key] != nil {
					continue
				}
				for _, f := range cat.fks {
					if f.child == t.key && f.parent != t.key && m.byKey[f.parent] != nil {
						add(t, len(m.tables))
						grew = true
						break
					}
				}
			}
		}
	} else {
		seen := map[tkey]bool{}
		for i, name := range cfg.Tables {
			field := fmt.Sprintf("tables[%d]", i)
			t, err := cat.lookup(name, cfg.database)
			switch {
			case err != nil:
				problems = append(problems, sdk.FieldError{Field: field, Problem: err.Error()})
				continue
			case seen[t.key]:
				problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is listed twice", t.name())})
				continue
			case ignored[t.key]:
				problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is in both tables and ignore_tables", t.name())})
				continue
			}
			seen[t.key] = true
			add(t, i)
		}
	}
	if len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	for _, t := range m.tables {
		if t.tenant != nil {
			if p := columnProblem(*t.tenant); p != "" {
				problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf("%s.%s: %s", t.name(), t.tenant.name, p)})
			}
		}
	}

	for _, f := range cat.fks {
		ct, pt := m.byKey[f.child], m.byKey[f.parent]
		if ct == nil && pt == nil {
			continue
		}
		e := &keyEdge{fk: f, child: cat.tables[f.child], parent: cat.tables[f.parent], childT: ct, parentT: pt}
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
		if t.tenant == nil && len(t.owners) == 0 {
			problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf(
				"%s has no column %q and no foreign key to a listed table, so its rows cannot be told apart by tenant", t.name(), cfg.tenantColumnFor(t.cat))})
		}
		if len(t.self) > 0 && len(t.cat.pk) == 0 {
			problems = append(problems, sdk.FieldError{Field: fieldOf(cfg, t), Problem: fmt.Sprintf(
				"%s references itself (%s) but has no primary key, which deleting its rows leaves first needs", t.name(), t.self[0].fk.name)})
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
	if problems := m.checkReached(cfg); len(problems) > 0 {
		return nil, sdk.InvalidConfig(problems...)
	}
	if err := m.sortTables(cfg); err != nil {
		return nil, err
	}
	m.planCascades()
	m.findBystanders(cfg, cat)
	for _, t := range m.tables {
		m.names = append(m.names, t.name())
	}
	for _, t := range m.targets {
		m.names = append(m.names, t.name())
	}
	return m, nil
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

// addCascadeTargets finds tables outside the set that ON DELETE CASCADE
// reaches from it. Those with the tenant column become targets, deleted
// explicitly before their parents; rows of any other table reached this way
// are refused by the preflight.
func (m *model) addCascadeTargets(cfg config, cat *catalog) error {
	queue := append([]*logicalTable(nil), m.tables...)
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, e := range m.inbound {
			if e.parentT != from || e.fk.action != 'c' || (e.childT != nil && e.childT.listed) || e.child == e.parent {
				continue
			}
			child := e.child
			col, ok := child.col(cfg.tenantColumnFor(child))
			if !ok {
				continue // not provably this tenant's: the preflight refuses such rows
			}
			t := m.byKey[child.key]
			if t == nil {
				if p := columnProblem(col); p != "" {
					return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
						"%s.%s, reached by ON DELETE CASCADE of %s: %s", child.name(), col.name, e.fk.name, p)})
				}
				t = &logicalTable{cat: child, tenant: &col, pos: len(cfg.Tables) + len(m.targets)}
				m.byKey[child.key] = t
				m.targets = append(m.targets, t)
				for _, f := range cat.fks {
					if f.parent == child.key {
						ne := &keyEdge{fk: f, child: cat.tables[f.child], parent: child, childT: m.byKey[f.child], parentT: t}
						if f.child == child.key {
							t.self = append(t.self, ne)
						}
						m.inbound = append(m.inbound, ne)
					}
				}
				for _, in := range m.inbound {
					if in.childT == nil && in.child.key == child.key {
						in.childT = t
					}
				}
				if len(t.self) > 0 {
					return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
						"%s, reached by ON DELETE CASCADE of %s, references itself: list it in tables", child.name(), e.fk.name)})
				}
				queue = append(queue, t)
			}
			e.childT = t
			t.cascadeFrom = append(t.cascadeFrom, e)
		}
	}
	return nil
}

// owner reports whether e is how its child, a table without the tenant
// column, belongs to the tenant.
func owner(e *keyEdge) bool {
	return e.childT != nil && e.childT.tenant == nil && slices.Contains(e.childT.owners, e)
}

// setNullStripsTenant reports whether e's ON DELETE SET NULL/DEFAULT would
// take a row of its child out of its tenant: it writes the tenant column,
// or it is how a table without one belongs to a tenant.
func setNullStripsTenant(e *keyEdge) bool {
	if e.fk.action != 'n' && e.fk.action != 'd' || e.childT == nil {
		return false
	}
	if e.childT.tenant == nil {
		return owner(e)
	}
	return containsFold(e.fk.fkCols, e.childT.tenant.name)
}

// containsFold reports whether names holds name in any case (MySQL
// compares column names without regard to case).
func containsFold(names []string, name string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// findBystanders lists the tables with a tenant column of a supported type
// in the schemas of the set that are neither in the set nor targets.
func (m *model) findBystanders(cfg config, cat *catalog) {
	schemas := map[string]bool{}
	for _, t := range m.tables {
		schemas[t.cat.key[0]] = true
	}
	var keys []tkey
	for k, ct := range cat.tables {
		if !schemas[k[0]] || m.byKey[k] != nil {
			continue
		}
		if col, ok := ct.col(cfg.tenantColumnFor(ct)); ok && columnProblem(col) == "" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		ct := cat.tables[k]
		col, _ := ct.col(cfg.tenantColumnFor(ct))
		m.bystanders = append(m.bystanders, &logicalTable{cat: ct, tenant: &col, listed: true})
	}
}

// watchedBy are the tables whose tenant rows a delete of t's rows may
// remove through a trigger: every other table with the tenant column the
// model knows (set, targets and bystanders), and the set's dependent
// tables.
func (m *model) watchedBy(t *logicalTable) []*logicalTable {
	var out []*logicalTable
	for _, u := range append(append([]*logicalTable(nil), m.order...), m.bystanders...) {
		if u != t {
			out = append(out, u)
		}
	}
	return out
}
