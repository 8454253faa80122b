// Command lifecycled-plugin-mysql is the bundled TenantDeleter for MySQL and
// MariaDB: it deletes one tenant's rows table by table, children first, in
// batches of DELETE ... ORDER BY <primary key> LIMIT n, matching the tenant
// column byte for byte (MySQL's usual collations ignore case, accents and
// trailing spaces), after a preflight that refuses a deletion whose
// cascades or keys would reach rows of other tenants. See docs/plugins.md.
package main

import "github.com/lifecycled/lifecycled/sdk"

func main() { sdk.ServeTenantDeleter(newDeleter()) }
