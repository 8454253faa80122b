package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

// Code the delete runs that the plan did not list: a DELETE trigger or
// rule on a deleted table, or a table made a child (by inheritance) of a
// deleted one, runs or is deleted from by every DELETE of the erasure. One
// added after the plan was approved deleted another tenant's rows (found
// by an outside attack): each is part of the plan's fingerprint, so the
// job waits for a new approval, and the plan names them.
func TestDeleteHooksAddedAfterTheCheckAreAChangedPlan(t *testing.T) {
	t.Parallel()
	for name, ddl := range map[string]string{
		"trigger": `CREATE FUNCTION zap() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM notes WHERE tenant_id = 'b'; RETURN OLD; END $$;
			CREATE TRIGGER zap BEFORE DELETE ON accounts FOR EACH ROW EXECUTE FUNCTION zap()`,
		"statement trigger": `CREATE FUNCTION zap() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM notes WHERE tenant_id = 'b'; RETURN NULL; END $$;
			CREATE TRIGGER zap AFTER DELETE ON accounts FOR EACH STATEMENT EXECUTE FUNCTION zap()`,
		"rule":              `CREATE RULE zap AS ON DELETE TO accounts DO ALSO DELETE FROM audit_log`,
		"inheritance child": `CREATE TABLE accounts_hist () INHERITS (accounts); INSERT INTO accounts_hist VALUES (10, 'a'), (11, 'b')`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newSchemaEnv(t, driftSchema)
			// zap may keep or redirect rows (a row-level BEFORE DELETE
			// trigger, a rule): it is refused unless acknowledged.
			e.mustConfigure(t, map[string]any{"tables": []any{"notes", "accounts"}, "ignore_tables": []any{"audit_log", "note_reactions"},
				"acknowledged_hooks": []any{"public.accounts.zap"}})
			checked := e.mustPlan(t, "a").Fingerprint
			e.exec(t, ddl)
			plan := e.mustPlan(t, "a")
			require.NotEqual(t, checked, plan.Fingerprint, "what the delete runs changed: the fingerprint changes")
			before := e.snapshot(t)
			_, err := e.deleteChecked(t, "a", checked)
			require.Error(t, err, "Delete with the plan checked before the change must be refused")
			require.Equal(t, before, e.snapshot(t), "a refused Delete changes nothing")
			require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
			if name != "inheritance child" {
				require.Contains(t, err.Error(), "zap", "the refusal names the hook")
				joined := ""
				for _, n := range plan.Notes {
					joined += n + "\n"
				}
				require.Contains(t, joined, "zap", "the plan names the hook for the approver")
			} else {
				require.Contains(t, err.Error(), "accounts_hist")
			}
		})
	}
}
