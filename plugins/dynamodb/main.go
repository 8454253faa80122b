// Command lifecycled-plugin-dynamodb is the TenantDeleter for DynamoDB: it
// queries the tenant's partition for its keys only, deletes them with
// BatchWriteItem 25 at a time on several workers, retries UnprocessedItems
// with backoff (100 ms, x2, cap 5 s, 5 retries) and counts exactly what was
// deleted; Count uses Select=COUNT.
package main

import "github.com/lifecycled/lifecycled/sdk"

func main() { sdk.ServeTenantDeleter(newDeleter()) }
