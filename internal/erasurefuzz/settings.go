package erasurefuzz

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Drawing what surrounds a schema: triggers, the database's settings and
// the deleter's config.

func (s *Schema) drawTriggers(r *rand.Rand) {
	if r.IntN(3) != 0 {
		return
	}
	var withPK []*Table
	for _, t := range s.Tables {
		if t.PK == "id" && !t.Partitioned && !t.Versioned {
			withPK = append(withPK, t)
		}
	}
	if len(withPK) == 0 {
		return
	}
	t := withPK[r.IntN(len(withPK))]
	switch r.IntN(3) {
	case 0:
		s.Audit = &Table{Name: "audit_log", Tenant: "tenant_id", TenantType: s.auditType(), TenantNull: true, Cols: map[string]bool{}}
		s.Triggers = append(s.Triggers, s.auditTrigger(t))
		s.note("audit trigger")
	case 1:
		if s.has(MariaDB) {
			// MySQL cannot skip a row's delete: its "soft delete" copies
			// the row elsewhere before it goes.
			s.Audit = &Table{Name: "audit_log", Tenant: "tenant_id", TenantType: s.auditType(), TenantNull: true, Cols: map[string]bool{}}
		}
		s.Triggers = append(s.Triggers, s.softDeleteTrigger(t))
		s.note("soft-delete trigger")
		if r.IntN(3) == 0 {
			s.ack(t, "soft_"+strings.ToLower(t.Name))
			s.note("acknowledged soft-delete trigger")
		}
	case 2:
		if trig := s.cleanupTrigger(r, t); trig != "" {
			s.Triggers = append(s.Triggers, trig)
			s.note("clean-up trigger")
		}
	}
}

func (s *Schema) auditType() string {
	if s.has(Postgres) {
		return "text"
	}
	return "VARCHAR(64)"
}

func (s *Schema) ack(t *Table, trigger string) {
	var acks []any
	if v, ok := s.Config["acknowledged_hooks"].([]any); ok {
		acks = v
	}
	if s.Config == nil {
		s.Config = map[string]any{}
	}
	s.Config["acknowledged_hooks"] = append(acks, s.Name+"."+t.Name+"."+trigger)
}

func (s *Schema) drawSettings(r *rand.Rand) {
	if s.has(Postgres) {
		if r.IntN(10) == 0 {
			s.Settings["options"] = "-c session_replication_role=replica"
			s.note("session_replication_role=replica in the DSN")
		}
		if r.IntN(25) == 0 {
			t := s.Tables[r.IntN(len(s.Tables))]
			s.Alter = append(s.Alter, fmt.Sprintf("ALTER TABLE %s DISABLE TRIGGER ALL", s.qual(t)))
			s.note("DISABLE TRIGGER ALL")
		}
		return
	}
	if r.IntN(10) == 0 {
		s.Settings["foreign_key_checks"] = "0"
		s.note("foreign_key_checks=0 in the DSN")
	}
	if r.IntN(10) == 0 {
		s.Settings["sql_mode"] = "'PAD_CHAR_TO_FULL_LENGTH'"
		s.note("sql_mode=PAD_CHAR_TO_FULL_LENGTH in the DSN")
	}
}

func (s *Schema) drawConfig(r *rand.Rand) {
	if s.Config == nil {
		s.Config = map[string]any{}
	}
	s.Config["batch_size"] = float64(pick(r, 1, 2, 3, 1000))
	if r.IntN(8) == 0 {
		s.Config["global_rows"] = false
		s.note("global_rows = false")
	}
	if s.has(MariaDB) && r.IntN(2) == 0 {
		s.Config["system_versioned"] = "delete_history"
	}
	if s.Audit != nil && r.IntN(2) == 0 {
		s.Config["ignore_tables"] = []any{s.qualName(s.Audit)}
		s.Kept[s.Audit.Name] = true
	}
	if r.IntN(3) != 0 {
		s.Config["discover"] = true
		if s.has(Postgres) {
			s.Config["schemas"] = []any{s.Name}
		}
		return
	}
	// An explicit list: every table with the tenant column or a key into
	// a listed one, children first (a list the plugin refuses is a
	// refusal like any other).
	s.Config["tables"] = s.childFirst()
}
