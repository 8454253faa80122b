// Command lifecycled-plugin-postgres is the TenantDeleter for PostgreSQL: it
// deletes a tenant's rows table by table, child tables first (as configured,
// or derived from foreign keys with discover = true), in short batches so
// that no transaction holds locks for long, and counts with count(*).
package main

import "github.com/lifecycled/lifecycled/sdk"

func main() { sdk.ServeTenantDeleter(newDeleter()) }
