package sqldelete

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lifecycled/lifecycled/internal/fkgraph"
	"github.com/lifecycled/lifecycled/sdk"
)

// InboundKeys says how a dialect checks the foreign keys that point into
// the rows an erasure removes, before it removes any (a plugin's
// preflight).
type InboundKeys[E comparable] struct {
	// Inbound are the keys; Dropped those whose SET NULL the deletion
	// relies on.
	Inbound, Dropped []E
	// StripsTenant: the key's SET NULL would clear the tenant column too.
	StripsTenant func(E) bool
	// Aligned: every row the key lets reference the tenant's rows is the
	// tenant's, by the key's own columns; nothing to count.
	Aligned func(E) bool
	// Count counts the rows through the key that are not deleted with the
	// tenant's (with stripping, every referencing row).
	Count func(e E, stripping bool) (int64, error)
	// Describe is the problem text of n such rows.
	Describe func(e E, n int64, stripping bool) string
}

// Problems counts, key by key, the rows the erasure would leave
// referencing what it removes, and says what is wrong with each key that
// has some.
func (k InboundKeys[E]) Problems() ([]string, error) {
	var problems []string
	for _, e := range k.Inbound {
		stripping := slices.Contains(k.Dropped, e) && k.StripsTenant(e)
		if !stripping && k.Aligned(e) {
			continue
		}
		n, err := k.Count(e, stripping)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			problems = append(problems, k.Describe(e, n, stripping))
		}
	}
	return problems, nil
}

// TwoTenantsProblem is the problem of n rows of table that reference the
// tenant's rows through one key and another tenant's through another.
func TwoTenantsProblem(n int64, table string) string {
	return fmt.Sprintf("%s of %s reference rows of two tenants (this tenant's through one foreign key, a row that is not this tenant's through another): "+
		"whose they are cannot be told, so correct those rows first", fkgraph.Rows(n), table)
}

// Refused is the error of a preflight that found problems: permanent,
// since nothing changes until an operator corrects the rows or the
// schema; nil when there are none.
func Refused(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return sdk.Permanent(fmt.Errorf("erasure refused before deleting anything: %s", strings.Join(problems, "; ")))
}
