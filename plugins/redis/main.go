// Command lifecycled-plugin-redis is the TenantDeleter for Redis: it SCANs
// each configured key pattern (with the tenant id glob-escaped into
// {tenant}) and UNLINKs what it finds in pipelined batches, counting the keys
// Redis actually removed.
package main

import "github.com/lifecycled/lifecycled/sdk"

func main() { sdk.ServeTenantDeleter(&deleter{}) }
