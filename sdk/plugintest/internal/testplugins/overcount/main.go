// Command overcount counts a batch that failed as deleted, so a partial deletion reports
// more than went.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() { sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{OverCount: true}}) }
