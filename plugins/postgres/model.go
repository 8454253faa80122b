package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lifecycled/lifecycled/sdk"
)

// model is how one configuration erases a tenant from one database: the
// tables it deletes from (the "set"), how each row is known to be the
// tenant's (its tenant column, or a foreign key path to a row that is), the
// order that cannot violate a key, and every key through which deleting
// could reach rows outside the set.
type model struct {
	tables  []*mtable // the set, in delete order
	targets []*mtable // tables outside the set that this tenant's cascades reach
	steps   []step
	// inbound are the keys that reference a table the deletion removes rows
	// from (the set and the cascade targets), from anywhere.
	inbound []*medge
	// dropped are keys within the set whose order was given up to break a
	// cycle (ON DELETE CASCADE or SET NULL/DEFAULT): their action runs on
	// this tenant's own rows.
	dropped []*medge
	byRoot  map[uint32]*mtable
	names   []string // breakdown keys, set first then targets
}

// mtable is one logical table (a plain table or the root of a partition or
// inheritance tree).
type mtable struct {
	rel    *catRel
	leaves []*catRel // where its rows are stored
	// tenant is the tenant column; nil for a table whose rows belong to a
	// tenant through owners.
	tenant *catColumn
	owners []*medge // keys to tables of the set (dependent tables only)
	self   []*medge // keys to itself: deleted leaves of the tree first
	listed bool     // in the set (else a cascade target)
	// cascadeFrom: for a cascade target, the keys whose cascade reaches it.
	cascadeFrom []*medge
	// cascades are the tables a batch of this one can remove rows of by
	// cascade, counted per batch from the transaction's statistics.
	cascades []*mtable
	pos      int // configured position (explicit list), for tie breaks
}

func (t *mtable) name() string { return t.rel.qualified() }

// medge is a foreign key, declared on child, referencing parent.
type medge struct {
	fk              catFK
	child, parent   *catRel // the relations it is declared on
	childT, parentT *mtable // nil outside the set and targets
	// childTree: the relations whose rows the key covers (child and, for
	// a partitioned table, its partitions).
	childTree []uint32
}

func (e *medge) describe() string {
	return fmt.Sprintf("%s on %s (%s) references %s", e.fk.name, e.child.qualified(), strings.Join(e.fk.fkCols, ", "), e.parent.qualified())
}

// step is one table, or a cycle of tables whose keys are all DEFERRABLE
// and are deleted in one transaction with the keys deferred.
type step struct {
	tables []*mtable
}

// tenantColumnFor is the tenant column of a table under cfg.
func (cfg config) tenantColumnFor(r *catRel) string {
	if c, ok := cfg.TenantColumns[r.qualified()]; ok {
		return c
	}
	// A bare key names a table in public; a key with a dot is always
	// "schema.table" (a public table literally named "crm.accounts" is not
	// the table crm.accounts).
	if r.schema == "public" && !strings.Contains(r.name, ".") {
		if c, ok := cfg.TenantColumns[r.name]; ok {
			return c
		}
	}
	return cfg.TenantColumn
}

// tenantColumnNames are every column name a table may hold tenant ids in.
func (cfg config) tenantColumnNames() []string {
	out := []string{cfg.TenantColumn}
	for _, c := range cfg.TenantColumns {
		out = append(out, c)
	}
	return out
}

// buildModel checks the configuration against the catalogue and derives
// the deletion model. Every problem is a config error naming the table.
func buildModel(cfg config, cat *catalog) (*model, error) {
	m := &model{byRoot: map[uint32]*mtable{}}
	var problems []sdk.FieldError
	add := func(r *catRel, pos int) *mtable {
		t := &mtable{rel: r, listed: true, pos: pos}
		if col, ok := r.cols[cfg.tenantColumnFor(r)]; ok {
			t.tenant = &col
		}
		m.byRoot[r.oid] = t
		m.tables = append(m.tables, t)
		return t
	}
	if cfg.Discover {
		schemas := map[string]bool{}
		for _, s := range cfg.Schemas {
			schemas[s] = true
		}
		var cands []*catRel
		for _, r := range cat.rels {
			if schemas[r.schema] && len(r.parents) == 0 && r.kind != 'f' {
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
		e := &medge{fk: f, child: cat.rels[f.child], parent: cat.rels[f.parent], childT: ct, parentT: pt, childTree: cat.covered(f.child)}
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
	if err := m.order(cfg); err != nil {
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

func fieldOf(cfg config, t *mtable) string {
	if cfg.Discover {
		return "discover"
	}
	return fmt.Sprintf("tables[%d]", t.pos)
}

// checkOwnerCycles refuses dependent tables that own each other in a loop:
// their rows would belong to a tenant only through themselves.
func checkOwnerCycles(m *model) error {
	state := map[*mtable]int{} // 1 visiting, 2 done
	var visit func(t *mtable, path []string) error
	visit = func(t *mtable, path []string) error {
		switch state[t] {
		case 1:
			return sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: fmt.Sprintf(
				"tables without the tenant column reference each other in a loop (%s): give one of them the tenant column", strings.Join(append(path, t.name()), " -> "))})
		case 2:
			return nil
		}
		state[t] = 1
		for _, e := range t.owners {
			if e.parentT.tenant == nil {
				if err := visit(e.parentT, append(path, t.name())); err != nil {
					return err
				}
			}
		}
		state[t] = 2
		return nil
	}
	for _, t := range m.tables {
		if t.tenant == nil {
			if err := visit(t, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// addCascadeTargets finds tables outside the set that ON DELETE CASCADE
// reaches from it. Those with the tenant column lose this tenant's rows with
// their parents (and are counted); rows of any other table reached this
// way are refused by the preflight.
func (m *model) addCascadeTargets(cfg config, cat *catalog) error {
	queue := append([]*mtable(nil), m.tables...)
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, e := range m.inbound {
			if e.parentT != from || e.fk.action != 'c' || (e.childT != nil && e.childT.listed) {
				continue
			}
			cr := cat.root(e.child.oid)
			child := cat.rels[cr]
			col, ok := child.cols[cfg.tenantColumnFor(child)]
			if !ok {
				continue // any such row is not provably this tenant's: the preflight refuses it
			}
			t := m.byRoot[cr]
			if t == nil {
				if p := columnProblem(col); p != "" {
					return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
						"%s.%s, reached by ON DELETE CASCADE of %s: %s", child.qualified(), col.name, e.fk.name, p)})
				}
				t = &mtable{rel: child, tenant: &col}
				for _, oid := range cat.tree(cr) {
					if cat.rels[oid].kind == 'r' {
						t.leaves = append(t.leaves, cat.rels[oid])
					}
				}
				m.byRoot[cr] = t
				m.targets = append(m.targets, t)
				// Keys into the new target, and keys of it, are now edges of the model.
				for _, f := range cat.fks {
					if cat.root(f.parent) == cr {
						m.inbound = append(m.inbound, &medge{fk: f, child: cat.rels[f.child], parent: cat.rels[f.parent], childTree: cat.covered(f.child),
							childT: m.byRoot[cat.root(f.child)], parentT: t})
					}
				}
				for _, in := range m.inbound {
					if in.childT == nil && cat.root(in.child.oid) == cr {
						in.childT = t
					}
				}
				queue = append(queue, t)
			} else if reaches(t, from) {
				return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
					"ON DELETE CASCADE keys loop through tables this deleter does not list (%s and %s): list them", t.name(), from.name())})
			}
			e.childT = t
			t.cascadeFrom = append(t.cascadeFrom, e)
		}
	}
	return nil
}

// checkVisibility refuses what would let the deleter's reads disagree with
// what its deletes do: row-level security hiding rows of any table the
// preflight reads or a cascade reaches (the cascade ignores it), and tenant
// columns that compare ids by different rules (a citext column would take
// "ACME"'s rows when erasing "acme", who is another tenant in a text column).
func (m *model) checkVisibility(cfg config, cat *catalog) error {
	var problems []sdk.FieldError
	seen := map[uint32]bool{}
	check := func(root uint32, why string) {
		for _, oid := range cat.tree(root) {
			r := cat.rels[oid]
			if seen[oid] || !r.hiddenRows {
				continue
			}
			seen[oid] = true
			problems = append(problems, sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
				"%s (%s) has row-level security that may hide rows from the deleter's role, so the preflight could not see rows a cascade or key would reach: "+
					"connect as a role with BYPASSRLS, or as the owner of a table whose row security is not FORCEd", r.qualified(), why)})
		}
	}
	for _, e := range m.inbound {
		check(cat.root(e.child.oid), "it references "+e.parent.qualified()+" through "+e.fk.name)
	}
	for _, t := range m.targets {
		check(t.rel.oid, "a cascade reaches it")
	}
	var ci, cs []string
	for _, t := range append(append([]*mtable(nil), m.tables...), m.targets...) {
		if t.tenant == nil {
			continue
		}
		if t.tenant.caseInsensitive() {
			ci = append(ci, t.name())
		} else {
			cs = append(cs, t.name())
		}
	}
	if len(ci) > 0 && len(cs) > 0 {
		problems = append(problems, sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
			"the tenant column compares case-insensitively in %s (citext) but not in %s: \"ACME\" and \"acme\" would be one tenant in some tables and two in others; use one kind of column, or one deleter for each",
			strings.Join(ci, ", "), strings.Join(cs, ", "))})
	}
	if len(problems) > 0 {
		return sdk.InvalidConfig(problems...)
	}
	return nil
}

// reaches reports whether cascade target t is upstream of from.
func reaches(t, from *mtable) bool {
	seen := map[*mtable]bool{}
	var walk func(x *mtable) bool
	walk = func(x *mtable) bool {
		if x == t {
			return true
		}
		if seen[x] || x.listed {
			return false
		}
		seen[x] = true
		for _, e := range x.cascadeFrom {
			if walk(e.parentT) {
				return true
			}
		}
		return false
	}
	return walk(from)
}

// setNullStripsTenant reports whether e's ON DELETE SET NULL/DEFAULT would
// take a row of its child out of its tenant: it writes the tenant column,
// or it is how a table without one belongs to a tenant.
func setNullStripsTenant(e *medge) bool {
	if e.fk.action != 'n' && e.fk.action != 'd' {
		return false
	}
	t := e.childT
	if t == nil {
		return false
	}
	if t.tenant == nil {
		return slices.Contains(t.owners, e)
	}
	return slices.Contains(e.fk.changed(), t.tenant.name)
}

// order sorts the set child first. Inside a cycle, keys that cannot fail
// when the parent goes first are given up (CASCADE, then SET NULL/DEFAULT);
// a cycle left is deleted in one transaction when every key in it is
// DEFERRABLE NO ACTION, and refused otherwise.
func (m *model) order(cfg config) error {
	var edges []*medge
	for _, t := range m.tables {
		for _, e := range m.inbound {
			if e.childT == t && e.parentT != nil && e.parentT.listed && e.parentT != t {
				edges = append(edges, e)
			}
		}
	}
	owner := func(e *medge) bool { return e.childT.tenant == nil && slices.Contains(e.childT.owners, e) }
	for _, dropAction := range []string{"c", "nd"} {
		comp := sccs(m.tables, edges)
		kept := edges[:0:0]
		for _, e := range edges {
			if comp[e.childT] == comp[e.parentT] && strings.IndexByte(dropAction, e.fk.action) >= 0 && !owner(e) {
				m.dropped = append(m.dropped, e)
				continue
			}
			kept = append(kept, e)
		}
		edges = kept
	}
	comp := sccs(m.tables, edges)
	members := map[int][]*mtable{}
	for _, t := range m.tables {
		members[comp[t]] = append(members[comp[t]], t)
	}
	rank := func(t *mtable) (int, string) {
		if cfg.Discover {
			return 0, t.name()
		}
		return t.pos, t.name()
	}
	before := func(a, b *mtable) bool {
		pa, na := rank(a)
		pb, nb := rank(b)
		if pa != pb {
			return pa < pb
		}
		return na < nb
	}
	// Inside a cycle, DEFERRABLE NO ACTION keys are checked at commit, so
	// the cycle is deleted in one transaction in the order its other keys
	// need; those others must not form a cycle themselves.
	inner := map[int][]*mtable{}
	for c, ts := range members {
		if len(ts) == 1 {
			inner[c] = ts
			continue
		}
		var hard []*medge
		for _, e := range edges {
			// A key through which a table without the tenant column belongs
			// to the tenant stays ordered even when deferrable: its rows are
			// found through the parent's, which must still be there.
			if comp[e.childT] == c && comp[e.parentT] == c && (!(e.fk.action == 'a' && e.fk.deferrable) || owner(e)) {
				hard = append(hard, e)
			}
		}
		order, cyc := topoOrder(ts, hard, before)
		if cyc != nil {
			var names []string
			for _, t := range cyc {
				names = append(names, t.name())
			}
			sort.Strings(names)
			var culprit *medge
			for _, e := range hard {
				if slices.Contains(cyc, e.childT) && slices.Contains(cyc, e.parentT) {
					culprit = e
					break
				}
			}
			return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
				"foreign keys form a cycle between %s that no delete order satisfies (%s is %s): "+
					"make one key of the cycle DEFERRABLE (the cycle is then deleted in one transaction with its keys deferred) or ON DELETE CASCADE",
				strings.Join(names, ", "), culprit.describe(), actionName(culprit.fk))})
		}
		inner[c] = order
	}

	// The components in order, child first.
	heads := make([]*mtable, 0, len(members))
	headOf := map[*mtable]*mtable{}
	for c, ts := range inner {
		head := ts[0]
		for _, t := range ts {
			if before(t, head) {
				head = t
			}
		}
		heads = append(heads, head)
		for _, t := range members[c] {
			headOf[t] = head
		}
	}
	var between []*medge
	for _, e := range edges {
		if comp[e.childT] != comp[e.parentT] {
			between = append(between, &medge{fk: e.fk, childT: headOf[e.childT], parentT: headOf[e.parentT]})
		}
	}
	order, _ := topoOrder(heads, between, before) // acyclic: components
	m.tables = nil
	for _, head := range order {
		ts := inner[comp[head]]
		m.steps = append(m.steps, step{tables: ts})
		m.tables = append(m.tables, ts...)
	}
	if !cfg.Discover {
		// An explicit list states the order: a listed parent before its
		// child is a mistake worth saying, not silently fixing.
		for _, e := range edges {
			if comp[e.childT] != comp[e.parentT] && e.childT.pos > e.parentT.pos {
				return sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: fmt.Sprintf(
					"%s references %s (%s), so it must be listed before it: list child tables first",
					e.childT.name(), e.parentT.name(), e.fk.name)})
			}
		}
	}
	return nil
}

// topoOrder sorts nodes so that the child of every edge comes before its
// parent, taking the first by before among those ready. When the edges
// form a cycle it returns the nodes left over.
func topoOrder(nodes []*mtable, edges []*medge, before func(a, b *mtable) bool) (order, cycle []*mtable) {
	pending := map[*mtable]int{}
	parents := map[*mtable][]*mtable{}
	seen := map[[2]*mtable]bool{}
	for _, e := range edges {
		k := [2]*mtable{e.childT, e.parentT}
		if e.childT == e.parentT || seen[k] {
			continue
		}
		seen[k] = true
		pending[e.parentT]++
		parents[e.childT] = append(parents[e.childT], e.parentT)
	}
	var ready []*mtable
	for _, n := range nodes {
		if pending[n] == 0 {
			ready = append(ready, n)
		}
	}
	for len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return before(ready[i], ready[j]) })
		n := ready[0]
		ready = ready[1:]
		order = append(order, n)
		for _, p := range parents[n] {
			pending[p]--
			if pending[p] == 0 {
				ready = append(ready, p)
			}
		}
	}
	if len(order) < len(nodes) {
		for _, n := range nodes {
			if !slices.Contains(order, n) {
				cycle = append(cycle, n)
			}
		}
		return nil, cycle
	}
	return order, nil
}

func fieldName(cfg config) string {
	if cfg.Discover {
		return "discover"
	}
	return "tables"
}

func actionName(f catFK) string {
	s := map[byte]string{'a': "NO ACTION", 'r': "RESTRICT", 'c': "ON DELETE CASCADE", 'n': "ON DELETE SET NULL", 'd': "ON DELETE SET DEFAULT"}[f.action]
	if (f.action == 'a' || f.action == 'r') && !f.deferrable {
		s += ", not deferrable"
	}
	return s
}

// sccs labels the strongly connected components of the child->parent graph
// (Tarjan).
func sccs(nodes []*mtable, edges []*medge) map[*mtable]int {
	out := map[*mtable][]*mtable{}
	for _, e := range edges {
		out[e.childT] = append(out[e.childT], e.parentT)
	}
	index, low := map[*mtable]int{}, map[*mtable]int{}
	onStack := map[*mtable]bool{}
	var stack []*mtable
	comp := map[*mtable]int{}
	next, label := 0, 0
	var strong func(v *mtable)
	strong = func(v *mtable) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range out[v] {
			if _, seen := index[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = label
				if w == v {
					break
				}
			}
			label++
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			strong(v)
		}
	}
	return comp
}

// stepOf is the index of t's step in the delete order (-1 outside the set).
func (m *model) stepOf(t *mtable) int {
	for i, s := range m.steps {
		if slices.Contains(s.tables, t) {
			return i
		}
	}
	return -1
}

// planCascades finds, for each table of the set, the tables a batch of it
// can remove rows of by cascade: targets, and set tables that are not
// emptied before it.
func (m *model) planCascades() {
	stepOf := map[*mtable]int{}
	for i, s := range m.steps {
		for _, t := range s.tables {
			stepOf[t] = i
		}
	}
	for _, t := range m.tables {
		seen := map[*mtable]bool{t: true}
		queue := []*mtable{t}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, e := range m.inbound {
				if e.parentT != x || e.fk.action != 'c' || e.childT == nil || seen[e.childT] {
					continue
				}
				if e.childT.listed && stepOf[e.childT] < stepOf[t] {
					continue // emptied of this tenant before t
				}
				seen[e.childT] = true
				t.cascades = append(t.cascades, e.childT)
				queue = append(queue, e.childT)
			}
		}
	}
}

// predicate builds SQL conditions over the tenant parameter $1.
type predicate struct{ n int }

func (p *predicate) alias() string {
	p.n++
	return fmt.Sprintf("l%d", p.n)
}

// own is true for rows of t (as alias a) that belong to the tenant.
func (p *predicate) own(t *mtable, a string) string {
	if t.tenant != nil {
		return a + "." + pgx.Identifier{t.tenant.name}.Sanitize() + " = $1"
	}
	var ors []string
	for _, e := range t.owners {
		ors = append(ors, p.references(e, a))
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

// gone is true for rows of t (as alias a) that deleting the tenant removes:
// its own rows in the set, and rows a cascade reaches in a target.
func (p *predicate) gone(t *mtable, a string) string {
	if t.listed {
		return p.own(t, a)
	}
	var ors []string
	for _, e := range t.cascadeFrom {
		// The key covers the rows of the relation it is declared on (a
		// partition, perhaps), not the whole tree.
		ors = append(ors, fmt.Sprintf("(%s.tableoid = ANY('%s'::oid[]) AND %s)", a, oidArray(e.childTree), p.references(e, a)))
	}
	return "(" + p.own(t, a) + " AND (" + strings.Join(ors, " OR ") + "))"
}

func oidArray(oids []uint32) string {
	parts := make([]string, len(oids))
	for i, o := range oids {
		parts[i] = fmt.Sprint(o)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// references is true for rows of e's child (as alias a) that reference a
// row of e's parent that the deletion removes. Each referencing column is
// compared as the key compares it: as the referenced column's type when the
// two differ (text referencing char(n) ignores trailing blanks).
func (p *predicate) references(e *medge, a string) string {
	b := p.alias()
	return fmt.Sprintf("(%s) IN (SELECT %s FROM %s %s WHERE %s)",
		keyCols(a, e.fk.fkCols, e.fk.refTypes), cols(b, e.fk.refCols), e.parent.scan(), b, p.gone(e.parentT, b))
}

// keyCols renders the referencing columns, cast where the key compares them
// as another type.
func keyCols(alias string, names, as []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = alias + "." + pgx.Identifier{n}.Sanitize()
		if i < len(as) && as[i] != "" {
			out[i] = "(" + out[i] + ")::" + as[i]
		}
	}
	return strings.Join(out, ", ")
}

// cols renders alias.col, ... for a row comparison.
func cols(alias string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = alias + "." + pgx.Identifier{n}.Sanitize()
	}
	return strings.Join(out, ", ")
}

// leafReady is true for rows of t (as alias a) that no other row of the
// same tree references through a self key: deleting those first can never
// violate the key, at any batch size.
func (p *predicate) leafReady(t *mtable, a string) string {
	var ands []string
	for _, e := range t.self {
		c := p.alias()
		ands = append(ands, fmt.Sprintf("NOT EXISTS (SELECT 1 FROM %s %s WHERE (%s) = (%s) AND (%s.tableoid, %s.ctid) <> (%s.tableoid, %s.ctid))",
			e.child.scan(), c, cols(c, e.fk.fkCols), cols(a, e.fk.refCols), c, c, a, a))
	}
	return strings.Join(ands, " AND ")
}
